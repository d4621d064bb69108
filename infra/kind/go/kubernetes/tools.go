//go:build tools

// Package tools pins the Kubernetes commands a kind node runs, built from the Go module proxy
// (infra/kind/build-binaries.sh). k8s.io/kubernetes requires its staging modules at v0.0.0, so go.mod
// replaces each with the release of the same minor version.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
