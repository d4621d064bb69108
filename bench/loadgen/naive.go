package main

import (
	"bytes"
	"time"
)

// The naive floor (bench/peers/naive_pubsub.py): a welcome on accept, then every Redis pub/sub
// message as it comes, {"t":<publish ms>,"s":<first seq>,"c":<count>,"d":[…]}; no acks, no resume.

var (
	welcomePrefix = []byte(`{"type":"welcome"`)
	sMarker       = []byte(`"s":`)
	cMarker       = []byte(`"c":`)
)

func naiveHandle(c *client, data []byte, now time.Time) error {
	if bytes.HasPrefix(data, welcomePrefix) {
		c.markReady(now, c.reconnectedOnce())
		return nil
	}
	t, _ := intAfter(data, tMarker, 0)
	first, _ := intAfter(data, sMarker, 0)
	count, _ := intAfter(data, cMarker, 0)
	for i := range count {
		c.deliver(first+i, int64(t), now)
	}
	return nil
}
