package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// sparkwire's protocol, docs/protocol.md: hello, welcome (+ snapshot when not recovered), entries,
// coalesced acks, pong to the server's pings; a reconnect sends its session and cursor.

var (
	entriesPrefix = []byte(`{"type":"entries"`)
	seqMarker     = []byte(`{"seq":`)
	commitMarker  = []byte(`"commitMs":`)
	epochMarker   = []byte(`"epoch":"`)
)

func sparkwireStart(c *client) error {
	hello := map[string]any{"type": "hello", "v": 1}
	if k := c.gen.filters; k > 0 {
		hello["filter"] = map[string]any{"tenant": tenantName(c.index % k)}
	}
	if c.session != "" && c.position() != noPosition {
		hello["session"] = c.session
		cursor := map[string]any{"epoch": c.epoch, "seq": c.position()}
		if c.view != "" {
			cursor["view"] = c.view
		}
		hello["cursor"] = cursor
	}
	data, _ := json.Marshal(hello)
	c.write(data)
	return nil
}

func sparkwireAck(pos uint64) []byte {
	return fmt.Appendf(nil, `{"type":"ack","seq":%d,"duplicates":0,"gaps":0}`, pos)
}

type sparkwireFrame struct {
	Type          string `json:"type"`
	Session       string `json:"session"`
	Epoch         string `json:"epoch"`
	Recovered     bool   `json:"recovered"`
	AckEvery      int    `json:"ackEvery"`
	AckIntervalMs int    `json:"ackIntervalMs"`
	View          string `json:"view"`
	Seq           uint64 `json:"seq"`
	More          bool   `json:"more"`
	T             int64  `json:"t"`
}

func sparkwireHandle(c *client, data []byte, now time.Time) error {
	if bytes.HasPrefix(data, entriesPrefix) && c.gen.filters > 0 {
		return viewHandle(c, data, now)
	}
	if bytes.HasPrefix(data, entriesPrefix) {
		if epoch, ok := stringAfter(data[:min(len(data), 120)], epochMarker); ok {
			c.epoch = epoch
		}
		count, at := 0, 0
		for {
			seq, next := intAfter(data, seqMarker, at)
			if next < 0 {
				break
			}
			commitMs, after := intAfter(data, commitMarker, next)
			if after < 0 {
				return fmt.Errorf("entry without commitMs")
			}
			c.deliver(seq, int64(commitMs), now)
			count, at = count+1, after
		}
		c.ackDue(count, now, sparkwireAck)
		return nil
	}
	var frame sparkwireFrame
	if err := json.Unmarshal(data, &frame); err != nil {
		return err
	}
	switch frame.Type {
	case "welcome":
		resumed := c.session != ""
		c.session, c.epoch, c.view = frame.Session, frame.Epoch, frame.View
		c.mu.Lock()
		c.ackEvery, c.ackInterval = frame.AckEvery, time.Duration(frame.AckIntervalMs)*time.Millisecond
		c.mu.Unlock()
		if frame.Recovered {
			c.markReady(now, resumed)
		}
	case "snapshot":
		if !frame.More {
			c.epoch = frame.Epoch
			c.reposition(frame.Seq, c.position() != noPosition) // a snapshot for a client with a position is a reset
			c.markReady(now, c.reconnectedOnce())
		}
	case "acks": // the pod's ack budget moved (docs/protocol.md): ack as it now asks
		c.mu.Lock()
		c.ackEvery, c.ackInterval = frame.AckEvery, time.Duration(frame.AckIntervalMs)*time.Millisecond
		c.mu.Unlock()
	case "ping":
		c.write(fmt.Appendf(nil, `{"type":"pong","t":%d}`, frame.T))
	case "error":
		c.gen.stats.note("error frame: " + string(data[:min(len(data), 200)]))
	}
	return nil
}

func (c *client) reconnectedOnce() bool {
	c.statMu.Lock()
	defer c.statMu.Unlock()
	return c.reconnects > 0
}
