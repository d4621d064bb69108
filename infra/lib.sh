# shellcheck shell=bash
# Shared by infra/setup.sh and infra/kind/*.sh (sourced): step headers and the stamps that let an idempotent
# step skip its work while the fingerprint of its inputs is unchanged. Needs CACHE set by the caller.

header() { printf '\n==> %s\n' "$*"; }

# fingerprint FILE... : one hash over the given inputs' contents.
fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# fresh NAME FINGERPRINT : is the stamp NAME recorded for exactly these inputs?
fresh() { [[ -f "$CACHE/stamps/$1" && "$(cat "$CACHE/stamps/$1")" == "$2" ]]; }
stamp() { mkdir -p "$CACHE/stamps" && echo "$2" > "$CACHE/stamps/$1"; }

# uptime_s : seconds since boot (the wall clock drifts on these VMs; durations are measured with this).
uptime_s() { cut -d' ' -f1 /proc/uptime | cut -d. -f1; }

# go_module_dir MODULE@VERSION : download a module from the Go module proxy (sources only, into the module
# cache) and print where it was unpacked. Run outside any module, so no go.mod's replaces apply.
go_module_dir() {
  local scratch dir
  scratch="$(mktemp -d)"
  dir="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')"
  rm -rf "$scratch"
  [[ -n "$dir" && -d "$dir" ]] || { echo "ERROR: could not download Go module $1" >&2; return 1; }
  echo "$dir"
}

# docker_build ARGS... : `docker build -q ARGS`, printing the image ID only; the docker CLI's "legacy builder
# is deprecated" notice (stderr, every build on an engine without buildx) is shown only with a failure.
docker_build() {
  local log status=0
  log="$(mktemp)"
  docker build -q "$@" 2>"$log" >/dev/null || status=$?
  ((status == 0)) || cat "$log" >&2
  rm -f "$log"
  return "$status"
}

# image_fresh TAG FINGERPRINT : does the local image TAG carry the label sparkwire.inputs=FINGERPRINT? Images
# are shared by every checkout on the machine, so their freshness is kept on the image, not in a stamp.
image_fresh() {
  [[ "$(docker image inspect --format '{{ index .Config.Labels "sparkwire.inputs" }}' "$1" 2>/dev/null)" == "$2" ]]
}
