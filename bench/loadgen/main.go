// Command loadgen is the benchmark's one load generator for every server it compares (sparkwire's
// gateway, the centrifuge peer, the naive pub/sub floor): N WebSocket clients in one Go process, one
// goroutine each, so on a 2-CPU box the clients cost little CPU next to the server under test.
//
// The Python orchestrator (bench/side_by_side.py) drives it over stdin/stdout, one JSON object per line
// each way: connect, phase_start, phase_end, disconnect, exit (see commands.go).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	gen := newGenerator()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var cmd command
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen: bad command:", err)
			os.Exit(2)
		}
		result, done := gen.handle(cmd)
		if err := out.Encode(result); err != nil {
			os.Exit(1)
		}
		if done {
			return
		}
	}
}
