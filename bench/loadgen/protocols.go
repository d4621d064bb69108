package main

import (
	"bytes"
	"strconv"
	"time"
)

// protocol is what differs between the servers: the first frames, how a frame is applied, and the
// ack frame (nil: the protocol has no acks).
type protocol struct {
	start  func(c *client) error
	handle func(c *client, data []byte, now time.Time) error
	ack    func(pos uint64) []byte
}

var protocols = map[string]protocol{
	"sparkwire":  {start: sparkwireStart, handle: sparkwireHandle, ack: sparkwireAck},
	"centrifuge": {start: centrifugeStart, handle: centrifugeHandle},
	"naive":      {start: func(*client) error { return nil }, handle: naiveHandle},
}

// intAfter parses the unsigned integer right after the first marker at or after from; it returns the
// value and the index after it (-1 when the marker is missing). Frames are scanned rather than parsed
// as JSON so that the load generator's CPU stays small next to the server's.
func intAfter(data, marker []byte, from int) (uint64, int) {
	i := bytes.Index(data[from:], marker)
	if i < 0 {
		return 0, -1
	}
	start := from + i + len(marker)
	end := start
	for end < len(data) && data[end] >= '0' && data[end] <= '9' {
		end++
	}
	v, err := strconv.ParseUint(string(data[start:end]), 10, 64)
	if err != nil {
		return 0, -1
	}
	return v, end
}

// stringAfter returns the JSON string (without escapes, which the benchmark's ids never have) after marker.
func stringAfter(data, marker []byte) (string, bool) {
	i := bytes.Index(data, marker)
	if i < 0 {
		return "", false
	}
	start := i + len(marker)
	end := bytes.IndexByte(data[start:], '"')
	if end < 0 {
		return "", false
	}
	return string(data[start : start+end]), true
}
