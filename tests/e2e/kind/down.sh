#!/usr/bin/env bash
# Deletes the kind cluster of tests/e2e/kind/up.sh (everything in it: sparkwire, the operator, ingress-nginx).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
export PATH="$ROOT/.cache/kind/bin:$PATH"
command -v kind >/dev/null || { echo "kind is not installed: nothing to delete" >&2; exit 0; }
kind delete cluster --name sparkwire
