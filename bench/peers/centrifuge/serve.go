package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"

	"github.com/centrifugal/centrifuge"
)

func serve(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ExitOnError)
	port := flags.Int("port", 8000, "HTTP port (WebSocket at /connection/websocket)")
	redisAddr := flags.String("redis", "127.0.0.1:6379", "redis-server address")
	_ = flags.Parse(args)

	node, err := newNode(*redisAddr)
	if err != nil {
		return err
	}
	// Anonymous clients (sparkwire's gateway runs with --insecure-no-auth in the benchmark likewise).
	node.OnConnecting(func(context.Context, centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		return centrifuge.ConnectReply{Credentials: &centrifuge.Credentials{UserID: ""}}, nil
	})
	node.OnConnect(func(client *centrifuge.Client) {
		client.OnSubscribe(func(e centrifuge.SubscribeEvent, cb centrifuge.SubscribeCallback) {
			if e.Channel != Channel {
				cb(centrifuge.SubscribeReply{}, centrifuge.ErrorPermissionDenied)
				return
			}
			// A positioned, recoverable subscription: Centrifugo's force_recovery + force_positioning.
			cb(centrifuge.SubscribeReply{Options: centrifuge.SubscribeOptions{
				EnableRecovery: true, EnablePositioning: true,
			}}, nil)
		})
	})
	if err := node.Run(); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/connection/websocket", centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{}))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", *port), mux)
}
