package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/centrifugal/centrifuge"
)

// publish sends perBatch publications every interval for seconds, on a fixed schedule (a slow batch is
// followed by the next at once), the same cadence as sparkwire's Committer in the benchmark. Each
// payload carries its publish time (ms) so clients measure publish->receive on the same clock as the
// gateway's commitMs. With --start-at-ms the schedule starts at that wall-clock time (Unix ms), the same
// grid the benchmark gives sparkwire's Committer, so both are in the same phase against an event timed on it
// (the SIGKILL test); a process that starts after it reports how late its first batch was. It prints one
// JSON line: publications, elapsed seconds, the channel's last offset, lateMs.
func publish(args []string) error {
	flags := flag.NewFlagSet("publish", flag.ExitOnError)
	redisAddr := flags.String("redis", "127.0.0.1:6379", "redis-server address")
	perBatch := flags.Int("per-batch", 1, "publications per batch")
	intervalMs := flags.Int("interval-ms", 100, "one batch this often")
	seconds := flags.Float64("seconds", 5, "publish for this long")
	payloadBytes := flags.Int("payload-bytes", 100, "size of each publication's data")
	startAtMs := flags.Int64("start-at-ms", 0, "the schedule's first batch at this Unix time in ms (0: at once)")
	_ = flags.Parse(args)

	node, err := newNode(*redisAddr)
	if err != nil {
		return err
	}
	if err := node.Run(); err != nil {
		return err
	}
	interval := time.Duration(*intervalMs) * time.Millisecond
	started := time.Now()
	if *startAtMs > 0 {
		started = time.UnixMilli(*startAtMs)
	}
	lateMs := max(time.Since(started).Milliseconds(), 0)
	published, batches := 0, 0
	var last centrifuge.StreamPosition
	for time.Duration(batches)*interval < time.Duration(*seconds*float64(time.Second)) {
		if delay := time.Until(started.Add(time.Duration(batches) * interval)); delay > 0 {
			time.Sleep(delay)
		}
		pos, err := publishBatch(node, published, *perBatch, *payloadBytes)
		if err != nil {
			return err
		}
		if pos.Offset > last.Offset {
			last = pos
		}
		published += *perBatch
		batches++
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"published": published, "seconds": time.Since(started).Seconds(),
		"offset": last.Offset, "epoch": last.Epoch, "lateMs": lateMs,
	})
}

// publishBatch publishes concurrently, so rueidis pipelines the batch into few round trips (and few
// AOF fsyncs), as the commit script writes a whole batch in one call; returns the highest position.
func publishBatch(node *centrifuge.Node, first, count, payloadBytes int) (centrifuge.StreamPosition, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		last     centrifuge.StreamPosition
		firstErr error
	)
	now := time.Now().UnixMilli()
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			result, err := node.Publish(Channel, payload(now, first+i, payloadBytes),
				centrifuge.WithHistory(historySize, historyTTL))
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("publish: %w", err)
			}
			if result.Offset > last.Offset {
				last = result.StreamPosition
			}
		}()
	}
	wg.Wait()
	return last, firstErr
}

// payload is {"t":<publish ms>,"n":<index>,"pad":"xx…"} of about size bytes.
func payload(ms int64, n, size int) []byte {
	head := fmt.Sprintf(`{"t":%d,"n":%d,"pad":"`, ms, n)
	return []byte(head + strings.Repeat("x", max(size-len(head)-2, 0)) + `"}`)
}
