package main

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

const (
	noPosition  = math.MaxUint64
	maxAttempts = 30
	readyWithin = 30 * time.Second
)

var dialer = &websocket.Dialer{
	NetDialContext:   (&net.Dialer{Timeout: 15 * time.Second}).DialContext,
	HandshakeTimeout: 15 * time.Second,
	ReadBufferSize:   4096,
	WriteBufferSize:  1024,
}

// client is one simulated subscriber. Its reader goroutine owns the protocol state; writes (acks,
// pongs) from that goroutine and from the ack sweeper go through mu, as gorilla allows one writer.
type client struct {
	gen     *generator
	index   int
	lastPos uint64 // atomic: the highest position applied (seq or offset), noPosition before the first
	closed  atomic.Bool

	mu          sync.Mutex // guards conn writes and the ack fields
	conn        *websocket.Conn
	ready       bool
	unacked     int
	ackAt       time.Time
	ackEvery    int
	ackInterval time.Duration

	// Protocol state, touched by the reader goroutine only.
	session, epoch string
	view           string // a filtered subscription's view id (the welcome's), sent back in the cursor
	urlIndex       int

	// Phase counters, guarded by statMu (read by phase_end while the reader runs).
	statMu                     sync.Mutex
	phasePos                   uint64
	received, lost, duplicates int64
	resets, reconnects         int64
	wrong                      int64 // filtered: entries received that the client's filter does not admit
	reachedAt                  time.Time
	watch                      bool
	reconnectedAt, caughtUpAt  time.Time
	dialedAt                   time.Time // when the last reconnect attempt's backoff ended and its dial began
	attempts                   int64     // reconnect attempts of this phase (more than reconnects: one failed)
}

func (c *client) position() uint64 { return atomic.LoadUint64(&c.lastPos) }

// open dials url, sends the protocol's first frames and reads until the client is ready (subscribed
// and positioned); the caller then runs the read loop.
func (c *client) open(ctx context.Context, url string) error {
	conn, _, err := dialer.DialContext(ctx, url, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.conn, c.ready = conn, false
	c.mu.Unlock()
	if err := c.gen.proto.start(c); err != nil {
		conn.Close()
		return err
	}
	_ = conn.SetReadDeadline(time.Now().Add(readyWithin))
	for !c.isReady() {
		if err := c.readOne(); err != nil {
			conn.Close()
			return err
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	return nil
}

func (c *client) readOne() error {
	_, data, err := c.conn.ReadMessage()
	if err != nil {
		return err
	}
	st := c.gen.stats
	if st.measuring.Load() {
		st.frames.Add(1)
		st.bytes.Add(int64(len(data)))
	}
	return c.gen.proto.handle(c, data, time.Now())
}

func (c *client) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// markReady is called by the protocol once the client is positioned (welcome, snapshot, subscribed).
func (c *client) markReady(now time.Time, resumed bool) {
	c.mu.Lock()
	c.ready, c.ackAt = true, now
	c.mu.Unlock()
	if resumed {
		c.statMu.Lock()
		if c.watch && c.reconnectedAt.IsZero() {
			c.reconnectedAt = now
		}
		c.statMu.Unlock()
	}
}

// run reads until the connection ends, then resumes it unless the benchmark closed it.
func (c *client) run() {
	for {
		if err := c.readOne(); err != nil {
			c.conn.Close()
			if c.closed.Load() {
				return
			}
			code := websocket.CloseAbnormalClosure
			var closeErr *websocket.CloseError
			if errors.As(err, &closeErr) {
				code = closeErr.Code
			}
			c.gen.stats.close(code)
			c.reconnect()
			return
		}
	}
}

// reconnect follows docs/protocol.md for every server alike: full-jitter backoff from 0.5 s doubling
// to 30 s, the next address of the list (a load balancer sending it to another pod).
func (c *client) reconnect() {
	c.statMu.Lock()
	c.reconnects++
	c.statMu.Unlock()
	backoff := 0.5
	for attempt := 0; attempt < maxAttempts && !c.closed.Load(); attempt++ {
		time.Sleep(time.Duration(rand.Float64() * backoff * float64(time.Second)))
		c.statMu.Lock()
		c.dialedAt = time.Now()
		c.attempts++
		c.statMu.Unlock()
		c.urlIndex = (c.urlIndex + 1) % len(c.gen.urls)
		if err := c.open(context.Background(), c.gen.urls[c.urlIndex]); err == nil {
			go c.run()
			return
		}
		backoff = min(backoff*2, 30)
	}
	c.gen.stats.note("gave up reconnecting")
}

func (c *client) write(data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeLocked(data)
}

func (c *client) writeLocked(data []byte) {
	if c.conn != nil {
		_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_ = c.conn.WriteMessage(websocket.TextMessage, data)
	}
}

func (c *client) close() {
	c.closed.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""),
			time.Now().Add(time.Second))
		c.conn.Close()
	}
}

// deliver applies one message at position pos published at publishMs (epoch ms, same host clock).
func (c *client) deliver(pos uint64, publishMs int64, now time.Time) {
	last := c.position()
	c.statMu.Lock()
	defer c.statMu.Unlock()
	if last != noPosition {
		if pos <= last {
			c.duplicates++
			return
		}
		c.lost += int64(pos - last - 1)
	}
	atomic.StoreUint64(&c.lastPos, pos)
	c.received++
	c.reachedAt = now
	if c.gen.stats.measuring.Load() {
		c.gen.stats.record(c.index, float64(now.UnixMicro())/1000-float64(publishMs))
	}
	if c.watch && !c.reconnectedAt.IsZero() && c.caughtUpAt.IsZero() && publishMs >= c.reconnectedAt.UnixMilli() {
		c.caughtUpAt = now // the first message published after it was back: it is live again
	}
}

// reposition moves the client to pos without delivering (a snapshot or a failed recovery): what lay
// between is lost to this client and the reset counted.
func (c *client) reposition(pos uint64, reset bool) {
	last := c.position()
	c.statMu.Lock()
	defer c.statMu.Unlock()
	if reset {
		c.resets++
		if last != noPosition && pos > last {
			c.lost += int64(pos - last)
		}
	}
	atomic.StoreUint64(&c.lastPos, pos)
}

// ackDue counts applied entries and sends an ack when ackEvery or the interval is reached.
func (c *client) ackDue(count int, now time.Time, frame func(uint64) []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unacked += count
	if c.unacked >= c.ackEvery || now.Sub(c.ackAt) >= c.ackInterval {
		c.sendAck(now, frame)
	}
}

func (c *client) sendAck(now time.Time, frame func(uint64) []byte) {
	c.writeLocked(frame(c.position()))
	c.unacked, c.ackAt = 0, now
	c.gen.stats.acks.Add(1)
}

func (c *client) ackIfDue(now time.Time) {
	ack := c.gen.proto.ack
	if ack == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready && c.unacked > 0 && now.Sub(c.ackAt) >= c.ackInterval {
		c.sendAck(now, ack)
	}
}

type phaseSummary struct {
	received, expected, lost, duplicates, resets, reconnects, wrong, covered int64
	reachedAt, backAt, caughtUpAt, dialedAt                                  float64
	attempts                                                                 int64
	complete, watched                                                        bool
}

func (c *client) phaseStart(watch bool) {
	c.statMu.Lock()
	defer c.statMu.Unlock()
	c.phasePos = c.position()
	c.received, c.lost, c.duplicates, c.resets, c.reconnects, c.wrong = 0, 0, 0, 0, 0, 0
	c.watch, c.reconnectedAt, c.caughtUpAt, c.dialedAt, c.attempts = watch, time.Time{}, time.Time{}, time.Time{}, 0
}

func (c *client) phaseReport(head uint64) phaseSummary {
	c.statMu.Lock()
	defer c.statMu.Unlock()
	pos := c.position()
	s := phaseSummary{received: c.received, lost: c.lost, duplicates: c.duplicates, resets: c.resets,
		reconnects: c.reconnects, wrong: c.wrong, watched: c.watch && c.reconnects > 0, attempts: c.attempts}
	if c.phasePos != noPosition && pos != noPosition && pos > c.phasePos {
		s.covered = int64(pos - c.phasePos) // positions of the log this client's stream moved past
	}
	if c.phasePos != noPosition && head > c.phasePos {
		s.expected = int64(head - c.phasePos)
		if k := c.gen.filters; k > 0 {
			s.expected = matchingIn(c.phasePos, head, c.index%k, k)
		}
	}
	if !c.reachedAt.IsZero() {
		s.reachedAt = unixSeconds(c.reachedAt)
	}
	if !c.reconnectedAt.IsZero() {
		s.backAt = unixSeconds(c.reconnectedAt)
	}
	if !c.caughtUpAt.IsZero() {
		s.caughtUpAt = unixSeconds(c.caughtUpAt)
	}
	if !c.dialedAt.IsZero() {
		s.dialedAt = unixSeconds(c.dialedAt)
	}
	s.complete = pos == head && c.lost == 0 && c.duplicates == 0 && c.resets == 0 && c.wrong == 0
	return s
}
