#!/usr/bin/env bash
# Every binary the offline kind cluster needs, compiled from the Go module proxy into .cache/kind/bin:
# Kubernetes v1.34.4 (apiserver, controller-manager, scheduler, proxy, kubelet, kubeadm, kubectl), etcd 3.6.5,
# CoreDNS 1.12.1 (the versions kubeadm v1.34 deploys), local-path-provisioner, kind, the kubeflow Spark
# operator, Traefik (the ingress controller) and skaffold. Pins live in infra/kind/go/*/go.mod (+ go.sum)
# and below; each group is skipped while its stamp matches. A cold build takes ~25 min on 2 cores (the
# figures per group are in infra/kind/README.md), mostly kube-apiserver and Traefik.
set -euo pipefail
# shellcheck source=infra/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# Groups to build: the arguments (e.g. `kind kubectl skaffold` where the published images are used), or all.
WANT=("$@")
want() { ((${#WANT[@]} == 0)) || [[ " ${WANT[*]} " == *" $1 "* ]]; }

# build GROUP "FILES THAT PIN IT" COMMAND... : run COMMAND unless the group's stamp is fresh and its
# binaries (listed in $outputs) exist; prints the time it took.
build() {
  local group="$1" pins="$2"; shift 2
  local fp missing=0 out start
  want "$group" || return 0
  # shellcheck disable=SC2086  # $pins: a space-separated list of files
  fp="$(cat $pins <(echo "$*") "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
  for out in $outputs; do [[ -x "$BIN/$out" ]] || missing=1; done
  if ((missing == 0)) && fresh "bin-$group" "$fp"; then
    echo "  $group: up to date"; return
  fi
  echo "  $group: building ($outputs)"
  start="$(uptime_s)"
  "$@"
  for out in $outputs; do [[ -x "$BIN/$out" ]] || { echo "ERROR: $group did not produce $out" >&2; exit 1; }; done
  stamp "bin-$group" "$fp"
  echo "  $group: built in $(($(uptime_s) - start)) s"
}

kubernetes() {
  local ldflags="-s -w" pkg cmd
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=34"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=2025-01-01T00:00:00Z"
  done
  for cmd in $outputs; do
    (cd "$HERE/go/kubernetes" && go build -trimpath -tags=selinux,notest -ldflags "$ldflags" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd")
    echo "    $cmd"
  done
}
etcd() {
  (cd "$HERE/go/etcd" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3 \
    && go build -trimpath -ldflags "-s -w" -o "$BIN/etcdctl" go.etcd.io/etcd/etcdctl/v3)
}
go_install() { GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "$@"; }
in_module() { local dir="$1" out="$2" pkg="$3"; (cd "$HERE/go/$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/$out" "$pkg"); }

# The operator reports its version like upstream's Makefile stamps it.
spark_operator() {
  (cd "$HERE/go/spark-operator" && go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$SPARK_OPERATOR_VERSION -X k8s.io/component-base/version.gitTreeState=clean" \
    -o "$BIN/spark-operator" github.com/kubeflow/spark-operator/v2/cmd/operator)
}

# Traefik's module zip has no webui/static (its built web UI, which webui/ embeds): build a copy of the
# module with an empty UI (the dashboard is off in this cluster).
traefik() {
  local work="$CACHE/kind/build/traefik" src
  src="$(go_module_dir "github.com/traefik/traefik/v3@$TRAEFIK_VERSION")"
  rm -rf "$work" && mkdir -p "$work"
  cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
  mkdir -p "$work/src/webui/static" && echo '<!doctype html><title>Traefik</title>' > "$work/src/webui/static/index.html"
  cp "$HERE"/go/traefik/{go.mod,go.sum,tools.go} "$work/"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$BIN/traefik" github.com/traefik/traefik/v3/cmd/traefik)
}

# The pause container: a static C program shipped in the Kubernetes module (build/pause/linux/pause.c).
pause() {
  local src
  src="$(go_module_dir "k8s.io/kubernetes@$KUBERNETES_VERSION")"
  gcc -Os -Wall -Werror -static "-DVERSION=v$PAUSE_VERSION" -o "$BIN/pause" "$src/build/pause/linux/pause.c"
}

header "Go binaries for the offline kind cluster -> ${BIN#"$ROOT"/}"
outputs="kube-apiserver kubelet kubeadm kubectl kube-controller-manager kube-scheduler kube-proxy"
build kubernetes "$HERE/go/kubernetes/go.mod $HERE/go/kubernetes/go.sum $HERE/versions.sh" kubernetes
outputs="kubectl"
[[ ${#WANT[@]} -gt 0 ]] && build kubectl "$HERE/go/kubernetes/go.mod $HERE/go/kubernetes/go.sum $HERE/versions.sh" kubernetes
outputs="pause"
build pause "$HERE/go/kubernetes/go.mod" pause
outputs="etcd etcdctl"
build etcd "$HERE/go/etcd/go.mod $HERE/go/etcd/go.sum" etcd
outputs="coredns"
build coredns /dev/null go_install "github.com/coredns/coredns@$COREDNS_VERSION"
outputs="local-path-provisioner"
build local-path-provisioner /dev/null go_install "github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION"
outputs="kube-router"
build kube-router /dev/null env GOBIN="$BIN" go install -trimpath \
  -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
  "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
outputs="kind"
build kind /dev/null go_install "sigs.k8s.io/kind@$KIND_VERSION"
outputs="spark-operator"
build spark-operator "$HERE/go/spark-operator/go.mod $HERE/go/spark-operator/go.sum" spark_operator
outputs="skaffold"
build skaffold "$HERE/go/skaffold/go.mod $HERE/go/skaffold/go.sum" \
  in_module skaffold skaffold github.com/GoogleContainerTools/skaffold/v2/cmd/skaffold
outputs="traefik"
build traefik "$HERE/go/traefik/go.mod $HERE/go/traefik/go.sum" traefik
