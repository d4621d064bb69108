#!/usr/bin/env bash
# Makes sure a Docker engine answers `docker info`; the first step of `make kind-up`.
#
# - An engine already answering (Docker Desktop, a systemd docker.service, a CI runner's) is used as is.
# - Otherwise, as root: Debian's docker.io is installed when dockerd is missing, and dockerd is started in
#   the background with its log in .cache/kind/dockerd.log (machines without systemd as PID 1, like this
#   project's sandboxes and most CI containers).
# - Privileged containers (every kind node is one) need every capability Docker asks for under
#   --privileged. Where the kernel's bounding set lacks one (seen here: CAP_SYS_RESOURCE on a VM), runc
#   fails with "unable to apply caps". Only then is runc-drop-missing-caps.sh installed as the engine's
#   default runtime: it removes from each container's OCI spec the capabilities this machine cannot grant.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${SPARKWIRE_CACHE:-$ROOT/.cache}"
LOG="$CACHE/kind/dockerd.log"
WRAPPER=/usr/local/sbin/sparkwire-runc
DAEMON_JSON=/etc/docker/daemon.json
mkdir -p "$CACHE/kind"

engine_answers() { docker info >/dev/null 2>&1; }

# Capabilities the bounding set lacks, as runc names them (CAP_...), from /proc/self/status.
missing_caps() {
  local bounding last bit
  bounding=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  last="$(cat /proc/sys/kernel/cap_last_cap)"
  for ((bit = 0; bit <= last; bit++)); do
    if ((((bounding >> bit) & 1) == 0)); then
      capsh --decode="$(printf "%x" $((1 << bit)))" 2>/dev/null | sed -n 's/.*=cap_\(.*\)/CAP_\U\1/p'
    fi
  done
}

start_dockerd() {
  echo "starting dockerd in the background (log: $LOG)"
  mkdir -p /lib/modules  # kind nodes mount it read-only; absent on some VMs
  # No descriptor of the caller past stderr: the daemon outlives it, and an inherited one (a `flock LOCK
  # make kind-up`'s lock, a pipe CI reads) would stay open as long as the daemon runs.
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd="${fd##*/}"
      if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec nohup dockerd </dev/null >>"$LOG" 2>&1
  ) &
  for _ in $(seq 1 60); do engine_answers && return 0; sleep 1; done
  echo "ERROR: dockerd did not answer within 60 s; its log:" >&2
  tail -n 30 "$LOG" >&2
  exit 1
}

install_runtime_wrapper() {
  local caps="$1"
  echo "this machine cannot grant: $caps -> default runtime $WRAPPER (drops them from OCI specs)"
  command -v jq >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q jq
  sed "s|@CAPS@|$caps|" "$ROOT/infra/kind/runc-drop-missing-caps.sh" > "$WRAPPER.tmp"
  chmod 0755 "$WRAPPER.tmp" && mv "$WRAPPER.tmp" "$WRAPPER"
  mkdir -p /etc/docker
  local current='{}'
  [[ -s "$DAEMON_JSON" ]] && current="$(cat "$DAEMON_JSON")"
  jq --arg path "$WRAPPER" '.runtimes["sparkwire-runc"] = {path: $path} | ."default-runtime" = "sparkwire-runc"' \
    <<<"$current" > "$DAEMON_JSON.tmp"
  mv "$DAEMON_JSON.tmp" "$DAEMON_JSON"
}

if engine_answers; then
  echo "Docker engine answers: $(docker version --format '{{.Server.Version}}')"
else
  [[ "$(id -u)" == 0 ]] || { echo "ERROR: no Docker engine answers and not root to start one" >&2; exit 1; }
  if ! command -v dockerd >/dev/null; then
    echo "installing Debian's docker.io"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io jq libcap2-bin
  fi
fi

caps="$(missing_caps | tr '\n' ' ' | sed 's/ $//')"
if [[ -n "$caps" && "$(id -u)" == 0 ]]; then
  if ! grep -q '"default-runtime": *"sparkwire-runc"' "$DAEMON_JSON" 2>/dev/null \
      || ! cmp -s <(sed "s|@CAPS@|$caps|" "$ROOT/infra/kind/runc-drop-missing-caps.sh") "$WRAPPER"; then
    install_runtime_wrapper "$caps"
    # dockerd re-reads daemon.json on SIGHUP (runtimes and default-runtime are reloadable).
    pkill -HUP -x dockerd 2>/dev/null || true
    sleep 1
  fi
fi
engine_answers || start_dockerd
echo "Docker engine $(docker version --format '{{.Server.Version}}'), runtime $(docker info --format '{{.DefaultRuntime}}')"

# Three kind nodes each run a kubelet, containerd and kube-proxy that watch files: kind's known issues ask for
# 512 inotify instances and 524288 watches ("too many open files" otherwise); Debian's defaults are 128 and
# ~190k. Raised only when lower, and only as root.
if [[ "$(id -u)" == 0 ]]; then
  (($(sysctl -n fs.inotify.max_user_instances) >= 512)) || sysctl -qw fs.inotify.max_user_instances=512
  (($(sysctl -n fs.inotify.max_user_watches) >= 524288)) || sysctl -qw fs.inotify.max_user_watches=524288
fi
