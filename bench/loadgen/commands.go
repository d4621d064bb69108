package main

import (
	"context"
	"sort"
	"sync"
	"syscall"
	"time"
)

type command struct {
	Cmd         string   `json:"cmd"`
	Proto       string   `json:"proto"`       // sparkwire | centrifuge | naive
	URLs        []string `json:"urls"`        // first for the initial connect; reconnects go round the list
	Count       int      `json:"count"`       // clients to open
	Concurrency int      `json:"concurrency"` // handshakes in flight
	Head        uint64   `json:"head"`        // phase_end: the last position published
	Timeout     float64  `json:"timeout"`     // phase_end: seconds to wait for every client to reach Head
	WatchKill   bool     `json:"watchKill"`   // phase_start: time every client's return to live after a loss
	Filters     int      `json:"filters"`     // connect (sparkwire): K > 0 gives client i the filter {"tenant": "t<i mod K>"}
}

type generator struct {
	clients []*client
	stats   *stats
	proto   protocol
	urls    []string
	cpu0    float64
	filters int // K distinct filters (0: unfiltered); see view.go
}

func newGenerator() *generator {
	g := &generator{stats: newStats()}
	go g.sweep()
	return g
}

func (g *generator) handle(c command) (map[string]any, bool) {
	switch c.Cmd {
	case "connect":
		return g.connect(c), false
	case "phase_start":
		return g.phaseStart(c), false
	case "phase_end":
		return g.phaseEnd(c), false
	case "disconnect":
		return g.disconnect(), false
	case "exit":
		g.disconnect()
		return map[string]any{}, true
	}
	return map[string]any{"error": "unknown command " + c.Cmd}, false
}

func (g *generator) connect(c command) map[string]any {
	g.proto, g.urls, g.filters = protocols[c.Proto], c.URLs, c.Filters
	g.stats.reset()
	concurrency := max(c.Concurrency, 1)
	started := time.Now()
	fresh := make([]*client, c.Count)
	durations := make([]float64, c.Count)
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i := range fresh {
		cl := &client{gen: g, index: i, lastPos: noPosition}
		fresh[i] = cl
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			t0 := time.Now()
			err := cl.open(context.Background(), g.urls[0])
			<-slots
			if err != nil {
				g.stats.note("connect: " + err.Error())
				go cl.reconnect() // like a browser: keep trying in the background
				durations[i] = -1
				return
			}
			durations[i] = time.Since(t0).Seconds()
			go cl.run()
		}()
	}
	wg.Wait()
	clientsMu.Lock()
	g.clients = append(g.clients, fresh...)
	clientsMu.Unlock()
	ok := make([]float64, 0, len(durations))
	for _, d := range durations {
		if d >= 0 {
			ok = append(ok, d)
		}
	}
	sort.Float64s(ok)
	return map[string]any{
		"connected": len(ok), "failed": c.Count - len(ok), "seconds": time.Since(started).Seconds(),
		"p50": pick(ok, 0.5), "p99": pick(ok, 0.99), "max": pick(ok, 1), "errors": g.stats.takeErrors(),
	}
}

func (g *generator) phaseStart(c command) map[string]any {
	for _, cl := range g.clients {
		cl.phaseStart(c.WatchKill)
	}
	g.stats.reset()
	g.stats.measuring.Store(true)
	g.cpu0 = ownCPU()
	return map[string]any{"t": unixSeconds(time.Now())}
}

// phaseEnd waits until every client holds c.Head (or the timeout), then reports the phase.
func (g *generator) phaseEnd(c command) map[string]any {
	deadline := time.Now().Add(time.Duration(c.Timeout * float64(time.Second)))
	behind := 0
	for {
		behind = 0
		for _, cl := range g.clients {
			if pos := cl.position(); pos == noPosition || pos < c.Head {
				behind++
			}
		}
		if behind == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.stats.measuring.Store(false)
	report := map[string]any{"clients": len(g.clients), "behind": behind, "cpu": ownCPU() - g.cpu0}
	for k, v := range g.stats.report() {
		report[k] = v
	}
	var reachedAt, backAt, caughtUp, lastDial float64
	var positionedMs []float64 // per resumed client: from its successful dial to positioned again
	var retried int64
	var received, expected, lost, duplicates, resets, reconnects, complete, recovered, wrong, covered int64
	waiting := 0
	for _, cl := range g.clients {
		s := cl.phaseReport(c.Head)
		received += s.received
		expected += s.expected
		lost += s.lost
		duplicates += s.duplicates
		resets += s.resets
		wrong += s.wrong
		covered += s.covered
		reconnects += s.reconnects
		reachedAt = max(reachedAt, s.reachedAt)
		if s.complete {
			complete++
		}
		if s.watched {
			backAt = max(backAt, s.backAt) // positioned again (welcome / subscribed), 0 if it never was
			lastDial = max(lastDial, s.dialedAt)
			if s.backAt > 0 && s.dialedAt > 0 {
				positionedMs = append(positionedMs, (s.backAt-s.dialedAt)*1000)
			}
			if s.attempts > 1 {
				retried++
			}
			if s.caughtUpAt > 0 {
				recovered++
				caughtUp = max(caughtUp, s.caughtUpAt)
			} else {
				waiting++
			}
		}
	}
	report["received"], report["expected"], report["lost"] = received, expected, lost
	report["duplicates"], report["resets"], report["reconnects"] = duplicates, resets, reconnects
	report["complete"], report["reached_at"], report["wrong"] = complete, reachedAt, wrong
	report["covered"] = covered
	report["caught_up_at"], report["recovered_clients"], report["not_caught_up"] = caughtUp, recovered, waiting
	report["back_at"], report["last_dial_at"], report["retried_clients"] = backAt, lastDial, retried
	sort.Float64s(positionedMs)
	report["positioned_ms"] = []float64{pick(positionedMs, 0.5), pick(positionedMs, 0.99), pick(positionedMs, 1)}
	return report
}

func (g *generator) disconnect() map[string]any {
	for _, cl := range g.clients {
		cl.close()
	}
	closed := len(g.clients)
	clientsMu.Lock()
	g.clients = nil
	clientsMu.Unlock()
	return map[string]any{"closed": closed}
}

// sweep sends the acks due by time alone (no entry arrived since the ack interval passed).
func (g *generator) sweep() {
	for range time.Tick(250 * time.Millisecond) {
		now := time.Now()
		for _, cl := range g.clientsSnapshot() {
			cl.ackIfDue(now)
		}
	}
}

var clientsMu sync.Mutex

func (g *generator) clientsSnapshot() []*client {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	return g.clients
}

func ownCPU() float64 {
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e9
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// pick is the nearest-rank quantile of sorted values (0 when empty).
func pick(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
