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
