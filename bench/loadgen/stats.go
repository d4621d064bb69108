package main

import (
	"sync"
	"sync/atomic"
)

// Latency histogram: 0.1 ms buckets up to 10 s, then 10 ms buckets up to 130 s (the last bucket holds
// everything slower). Sharded so 10k reader goroutines do not all hit the same cache lines.
const (
	fineBuckets   = 100_000
	coarseBuckets = 12_000
	shards        = 16
)

type stats struct {
	measuring atomic.Bool
	hist      [shards][]atomic.Uint64
	frames    atomic.Int64
	acks      atomic.Int64
	bytes     atomic.Int64
	closes    sync.Map // close code -> *atomic.Int64
	mu        sync.Mutex
	errors    []string
}

func newStats() *stats {
	s := &stats{}
	for i := range s.hist {
		s.hist[i] = make([]atomic.Uint64, fineBuckets+coarseBuckets)
	}
	return s
}

func bucketOf(ms float64) int {
	if ms < 0 {
		return 0
	}
	if ms < fineBuckets/10 {
		return int(ms * 10)
	}
	return min(fineBuckets+int((ms-fineBuckets/10)/10), fineBuckets+coarseBuckets-1)
}

// upperEdge is the bucket's upper bound in ms (a quantile is reported as its bucket's upper edge).
func upperEdge(b int) float64 {
	if b < fineBuckets {
		return float64(b+1) / 10
	}
	return fineBuckets/10 + float64(b-fineBuckets+1)*10
}

func (s *stats) record(shard int, ms float64) {
	s.hist[shard%shards][bucketOf(ms)].Add(1)
}

func (s *stats) close(code int) {
	v, _ := s.closes.LoadOrStore(code, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *stats) note(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errors) < 20 {
		s.errors = append(s.errors, text)
	}
}

func (s *stats) takeErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.errors
	s.errors = nil
	return out
}

func (s *stats) reset() {
	for i := range s.hist {
		for b := range s.hist[i] {
			s.hist[i][b].Store(0)
		}
	}
	s.frames.Store(0)
	s.acks.Store(0)
	s.bytes.Store(0)
	s.closes.Clear()
}

// report returns the phase's counters and the histogram as [[upper edge ms, count], …].
func (s *stats) report() map[string]any {
	hist := [][2]float64{}
	for b := range fineBuckets + coarseBuckets {
		var n uint64
		for i := range s.hist {
			n += s.hist[i][b].Load()
		}
		if n > 0 {
			hist = append(hist, [2]float64{upperEdge(b), float64(n)})
		}
	}
	closes := map[int]int64{}
	s.closes.Range(func(k, v any) bool {
		closes[k.(int)] = v.(*atomic.Int64).Load()
		return true
	})
	return map[string]any{
		"hist": hist, "frames": s.frames.Load(), "acks": s.acks.Load(), "bytes": s.bytes.Load(),
		"close_codes": closes, "errors": s.takeErrors(),
	}
}
