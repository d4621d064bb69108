// Command centrifuge-peer is the benchmark's peer: a WebSocket server on the Centrifugo engine
// (github.com/centrifugal/centrifuge) with what Centrifugo runs for a recoverable channel — the Redis
// broker, publication history in Redis and stream recovery/positioning — so sparkwire is compared with
// the same guarantees on the same redis-server, not with an in-memory broker.
//
//	centrifuge-peer serve   --port 8000 --redis 127.0.0.1:6379
//	centrifuge-peer publish --redis 127.0.0.1:6379 --per-batch 10 --interval-ms 100 --seconds 5
//
// The publisher is a separate process (like a Centrifugo backend calling the API) so the server's CPU
// figure holds only its fan-out work, as the gateway's holds no commit work.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: centrifuge-peer serve|publish [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "publish":
		err = publish(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "centrifuge-peer:", err)
		os.Exit(1)
	}
}
