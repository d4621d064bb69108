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
# With -f FILE and -t REPO:TAG, each named stage of FILE but the last is built and tagged first
# (REPO-stage-NAME:TAG): the legacy builder leaves a stage's image untagged, `docker image prune`
# (reclaim-disk.sh) then removes it with its layers, and the next build redoes the stage — the Spark
# stand-in's 450 MB download and unpacking took 99 s of every kind-up. Tagged, the stage stays as a cache.
docker_build() {
  local dockerfile="" tag="" previous="" argument stage i
  local -a untagged=()  # the arguments without -t TAG, for the stages' builds
  for argument in "$@"; do
    case "$previous" in -f) dockerfile="$argument" ;; -t) tag="$argument" ;; esac
    [[ "$argument" == -t || "$previous" == -t ]] || untagged+=("$argument")
    previous="$argument"
  done
  if [[ -n "$dockerfile" && -n "$tag" && "$tag" == *:* ]]; then
    local -a stages
    mapfile -t stages < <(sed -nE 's/^FROM[[:space:]]+[^[:space:]]+[[:space:]]+[Aa][Ss][[:space:]]+([a-z0-9_.-]+).*/\1/p' "$dockerfile")
    local last=$((${#stages[@]} - 1))
    # The last FROM is the image itself: only the stages before it (a last stage without a name is not listed).
    [[ "$(grep -cE '^FROM[[:space:]]' "$dockerfile")" -gt "${#stages[@]}" ]] && last=${#stages[@]}
    for ((i = 0; i < last; i++)); do
      stage="${stages[$i]}"
      _docker_build_quiet "${untagged[@]}" --target "$stage" -t "${tag%:*}-stage-$stage:${tag##*:}" || return
    done
  fi
  _docker_build_quiet "$@"
}

_docker_build_quiet() {
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
