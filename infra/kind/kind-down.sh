#!/usr/bin/env bash
# `make kind-down`: deletes the kind cluster of `make kind-up` (sparkwire, the operator, Traefik, and the
# volumes' data). The images and binaries built for it stay in Docker and .cache/kind for the next kind-up.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="${SPARKWIRE_CACHE:-$ROOT/.cache}/kind/bin:$PATH"
# An installed engine that is not running (after a reboot) still holds the containers of a cluster made
# before it, and they start again with it: start it so the cluster is deleted now, not revived by kind-up
# with whatever state it had (once: a helm release stuck mid-upgrade).
if command -v dockerd >/dev/null && ! docker info >/dev/null 2>&1; then
  bash "$ROOT/infra/kind/docker-engine.sh"
fi
# The cluster's volumes (a host directory its nodes mount, kind-up.sh) go with it.
rm -rf "${SPARKWIRE_CACHE:-$ROOT/.cache}/kind/volumes"
if command -v kind >/dev/null; then
  kind delete cluster --name sparkwire
  exit 0
fi
# No kind binary in this checkout (a fresh clone on a machine where another checkout made the cluster):
# a kind cluster is its node containers, labelled with its name; kind-up writes the kubeconfig again.
if docker info >/dev/null 2>&1; then
  nodes="$(docker ps -aq --filter label=io.x-k8s.kind.cluster=sparkwire)"
  if [[ -n "$nodes" ]]; then
    echo "Deleting the node containers of kind cluster sparkwire (no kind binary in this checkout)"
    # -v: a node's /var is an anonymous volume holding its images (5-10 GB); without -v it stays behind.
    # shellcheck disable=SC2086  # one container id per word
    docker rm -f -v $nodes >/dev/null
    exit 0
  fi
fi
echo "no kind cluster sparkwire: nothing to delete"
