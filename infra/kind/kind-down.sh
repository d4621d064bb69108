#!/usr/bin/env bash
# `make kind-down`: deletes the kind cluster of `make kind-up` (sparkwire, the operator, Traefik, and the
# volumes' data). The images and binaries built for it stay in Docker and .cache/kind for the next kind-up.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="${SPARKWIRE_CACHE:-$ROOT/.cache}/kind/bin:$PATH"
command -v kind >/dev/null || { echo "kind is not installed: nothing to delete" >&2; exit 0; }
kind delete cluster --name sparkwire
