# shellcheck shell=bash disable=SC2034  # sourced: the variables are for the scripts that source it
# Sourced first by every infra/kind script: where things are (ROOT, CACHE, HERE, BIN), the shared helpers
# (infra/lib.sh) and the versions and image names (versions.sh).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${SPARKWIRE_CACHE:-$ROOT/.cache}"
HERE="$ROOT/infra/kind"
BIN="$CACHE/kind/bin"
# shellcheck source=infra/lib.sh
source "$ROOT/infra/lib.sh"
# shellcheck source=infra/kind/versions.sh
source "$HERE/versions.sh"
