package main

import (
	"bytes"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// A filtered subscription (docs/protocol.md, "Filtered subscriptions"): with K filters, client i says
// {"tenant": "t<i mod K>"} in its hello, and the publisher (bench/_servers.py, Publisher with tenants=K)
// writes the entry at seq s with "tenant": "t<(s-1) mod K>". So a client's view is every K-th seq, and the
// client knows exactly which seqs it must receive: it counts what it gets against that (matchingIn), checks
// each entry's tenant (wrong), and follows the frames' coverage (after, through] for holes and repeats.

var (
	afterMarker   = []byte(`"after":`)
	throughMarker = []byte(`"through":`)
	tenantMarker  = []byte(`"tenant":`)
)

func tenantName(i int) string { return "t" + strconv.Itoa(i) }

// matchingIn counts the seqs s in (after, through] with (s-1) mod k == f.
func matchingIn(after, through uint64, f, k int) int64 {
	below := func(n int64) int64 { // seqs s in [1, n] with (s-1) mod k == f
		if n <= int64(f) {
			return 0
		}
		return (n-int64(f)-1)/int64(k) + 1
	}
	return below(int64(through)) - below(int64(after))
}

// tenantOf reads the entry's "tenant" value (t<i>) at or after from, before limit; -1 when absent.
func tenantOf(data []byte, from, limit int) int {
	i := bytes.Index(data[from:limit], tenantMarker)
	if i < 0 {
		return -1
	}
	j := from + i + len(tenantMarker)
	for j < limit && data[j] == ' ' {
		j++
	}
	if j+2 > limit || data[j] != '"' || data[j+1] != 't' {
		return -1
	}
	j += 2
	end := j
	for end < limit && data[end] >= '0' && data[end] <= '9' {
		end++
	}
	v, err := strconv.Atoi(string(data[j:end]))
	if err != nil {
		return -1
	}
	return v
}

func viewHandle(c *client, data []byte, now time.Time) error {
	head := data[:min(len(data), 200)]
	if epoch, ok := stringAfter(head, epochMarker); ok {
		c.epoch = epoch
	}
	after, i := intAfter(head, afterMarker, 0)
	through, j := intAfter(head, throughMarker, 0)
	if i < 0 || j < 0 || after >= through {
		return fmt.Errorf("filtered entries frame without after < through: %.120s", data)
	}
	k, own := c.gen.filters, c.index%c.gen.filters
	covered := c.position()
	c.statMu.Lock()
	if covered != noPosition && through <= covered {
		c.duplicates += matchingIn(after, through, own, k) // a frame already covered: its entries are repeats
		c.statMu.Unlock()
		return nil
	}
	if covered != noPosition && after > covered {
		c.lost += matchingIn(covered, after, own, k) // a hole in the coverage: what the view had there is lost
	}
	count, at := 0, 0
	for {
		seq, next := intAfter(data, seqMarker, at)
		if next < 0 {
			break
		}
		commitMs, end := intAfter(data, commitMarker, next)
		if end < 0 {
			c.statMu.Unlock()
			return fmt.Errorf("entry without commitMs")
		}
		switch {
		case covered != noPosition && seq <= covered:
			c.duplicates++
		case tenantOf(data, next, end) != own || (seq-1)%uint64(k) != uint64(own):
			c.wrong++
		default:
			c.received++
			c.reachedAt = now
			if c.gen.stats.measuring.Load() {
				c.gen.stats.record(c.index, float64(now.UnixMicro())/1000-float64(commitMs))
			}
		}
		count, at = count+1, end
	}
	atomic.StoreUint64(&c.lastPos, through) // covered: every entry of the view up to through is held
	c.statMu.Unlock()
	c.ackDue(max(count, 1), now, sparkwireAck) // a position frame moves the cursor too: it starts the ack clock
	return nil
}
