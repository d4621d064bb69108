package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// centrifuge's JSON protocol (v2): connect, subscribe (with recover, epoch and offset on a reconnect),
// pushes of publications, an empty object as ping answered with an empty object. Several replies may
// share one frame, one per line.

const channel = "bench"

var (
	pushPrefix   = []byte(`{"push":`)
	offsetMarker = []byte(`"offset":`)
	tMarker      = []byte(`{"t":`)
)

func centrifugeStart(c *client) error {
	c.write([]byte(`{"id":1,"connect":{"name":"loadgen"}}`))
	return nil
}

type centrifugeReply struct {
	ID    int `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Subscribe *struct {
		Epoch         string `json:"epoch"`
		Offset        uint64 `json:"offset"`
		Recovered     bool   `json:"recovered"`
		WasRecovering bool   `json:"was_recovering"`
		Publications  []struct {
			Offset uint64 `json:"offset"`
			Data   struct {
				T int64 `json:"t"`
			} `json:"data"`
		} `json:"publications"`
	} `json:"subscribe"`
}

func centrifugeHandle(c *client, data []byte, now time.Time) error {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if err := centrifugeLine(c, line, now); err != nil {
			return err
		}
	}
	return nil
}

func centrifugeLine(c *client, line []byte, now time.Time) error {
	switch {
	case len(line) == 0:
		return nil
	case bytes.Equal(line, []byte("{}")):
		c.write([]byte("{}"))
		return nil
	case bytes.HasPrefix(line, pushPrefix):
		offset, next := intAfter(line, offsetMarker, 0)
		t, after := intAfter(line, tMarker, 0)
		if next < 0 || after < 0 {
			return nil // not a publication (join/leave/disconnect pushes are off)
		}
		c.deliver(offset, int64(t), now)
		return nil
	}
	var reply centrifugeReply
	if err := json.Unmarshal(line, &reply); err != nil {
		return err
	}
	if reply.Error != nil {
		return fmt.Errorf("centrifuge error %d: %s", reply.Error.Code, reply.Error.Message)
	}
	switch reply.ID {
	case 1:
		sub := map[string]any{"channel": channel}
		if c.epoch != "" && c.position() != noPosition {
			sub["recover"], sub["epoch"], sub["offset"] = true, c.epoch, c.position()
		}
		frame, _ := json.Marshal(map[string]any{"id": 2, "subscribe": sub})
		c.write(frame)
	case 2:
		s := reply.Subscribe
		if s == nil {
			return fmt.Errorf("subscribe reply without result")
		}
		resumed := s.WasRecovering
		if resumed && s.Recovered {
			for _, pub := range s.Publications {
				c.deliver(pub.Offset, pub.Data.T, now)
			}
		} else {
			c.reposition(s.Offset, resumed) // not recovered: what was missed is lost
		}
		c.epoch = s.Epoch
		c.markReady(now, resumed)
	}
	return nil
}
