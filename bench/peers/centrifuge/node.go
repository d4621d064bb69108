package main

import (
	"time"

	"github.com/centrifugal/centrifuge"
)

// Channel is the one channel the benchmark publishes to and every client subscribes to.
const Channel = "bench"

// History keeps far more than a benchmark run publishes, so a resumed client is never told that its
// position is gone (sparkwire's ring and log retention are likewise larger than a run).
const (
	historySize = 1_000_000
	historyTTL  = time.Hour
)

// newNode returns a node on the Redis broker (history and pub/sub in Redis), started.
func newNode(redisAddr string) (*centrifuge.Node, error) {
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelError})
	if err != nil {
		return nil, err
	}
	shard, err := centrifuge.NewRedisShard(node, centrifuge.RedisShardConfig{Address: redisAddr})
	if err != nil {
		return nil, err
	}
	broker, err := centrifuge.NewRedisBroker(node, centrifuge.RedisBrokerConfig{
		Shards: []*centrifuge.RedisShard{shard},
	})
	if err != nil {
		return nil, err
	}
	node.SetBroker(broker)
	return node, nil
}
