//go:build tools

// Package tools pins etcd (the version kubeadm v1.34 deploys, image tag 3.6.5-0) for the kind node image.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
