#!/bin/sh
# start-sentinel.sh: how the Redis Sentinel of a data pod of the replicated Redis (redis.replication.enabled)
# starts. Mounted from the chart's ConfigMap; run by the `sentinel` container beside `redis` in every pod
# of the StatefulSet. Static text: everything pod- or release-specific comes from the environment.
#
# A Sentinel records what it learns (the current primary, the epochs, the replicas and the other
# Sentinels) in its own config file, which lives on the pod's data volume (SENTINEL_DIR), so it
# survives a restart of the pod or of the whole StatefulSet. Every start writes that file again: the
# settings from the chart (so an upgrade changes them) and, below them, the state the Sentinel had
# recorded. Which primary to monitor:
#
#   1. the one the OTHER pods' Sentinels name (a failover may have happened while this pod was down, and
#      then this pod's own record is stale);
#   2. else the one this Sentinel recorded last (a restart of every pod at once);
#   3. else pod 0: a first install (start-redis.sh makes pod 0 the primary then too).
#
# If the primary changed against the record, the recorded epochs and replicas of the old configuration
# are dropped (the Sentinel learns the replicas from the primary within seconds); its id, the current
# epoch and the other Sentinels are kept. Sentinels converge on the configuration with the highest epoch
# through their hello messages in any case.
#
# Environment:
#   POD_NAME, REDIS_NODES, MASTER_NAME, REDIS_PORT, SENTINEL_PORT   as for start-redis.sh
#   QUORUM            Sentinels that must agree the primary is down
#   DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS, PARALLEL_SYNCS   the Sentinel's settings of the primary
#   REDIS_PASSWORD    the data nodes' password (sentinel auth-pass), if set; the Sentinels take none
#   SENTINEL_DIR      where the Sentinel keeps its config file (/data/sentinel)
#   SENTINEL_BIND     the addresses it listens on (* -::*)
#   REDIS_SERVER      the redis-server to exec (redis-server)
set -eu

REDIS_PORT=${REDIS_PORT:-6379}
SENTINEL_PORT=${SENTINEL_PORT:-26379}
SENTINEL_DIR=${SENTINEL_DIR:-/data/sentinel}
SENTINEL_BIND=${SENTINEL_BIND:-* -::*}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
: "${POD_NAME:?}" "${REDIS_NODES:?}" "${MASTER_NAME:?}" "${QUORUM:?}" "${DOWN_AFTER_MS:?}"
: "${FAILOVER_TIMEOUT_MS:?}" "${PARALLEL_SYNCS:?}"

log() { echo "start-sentinel: $*" >&2; }

ordinal=${POD_NAME##*-}
# shellcheck disable=SC2086
set -- $REDIS_NODES
pod0=$1
shift "$ordinal"
me=$1
conf=$SENTINEL_DIR/sentinel.conf
mkdir -p "$SENTINEL_DIR"

# The primary the other pods' Sentinels name (the most named), or nothing.
ask_sentinels() {
    for node in $REDIS_NODES; do
        [ "$node" = "$me" ] && continue
        env -u REDISCLI_AUTH timeout 3 redis-cli -h "$node" -p "$SENTINEL_PORT" --raw \
            SENTINEL GET-MASTER-ADDR-BY-NAME "$MASTER_NAME" 2>/dev/null | head -n 1 || true
    done | grep -v '^$' | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }'
}

recorded=""
if [ -f "$conf" ]; then
    recorded=$(awk -v name="$MASTER_NAME" \
        'tolower($1) == "sentinel" && tolower($2) == "monitor" && $3 == name { print $4; exit }' "$conf")
fi

primary=$(ask_sentinels)
if [ -n "$primary" ]; then
    log "the other Sentinels name $primary as the primary"
elif [ -n "$recorded" ]; then
    primary=$recorded
    log "no other Sentinel answers; monitoring $primary, the primary this Sentinel recorded"
else
    primary=$pod0
    log "no other Sentinel answers and nothing is recorded: a first install, monitoring pod 0 ($pod0)"
fi

# Kept state: the Sentinel's id, the current epoch and the other Sentinels always; the epochs and replicas
# of the primary only while it is the recorded one.
state=""
if [ -f "$conf" ]; then
    if [ "$primary" = "$recorded" ]; then
        keep='^sentinel (myid|current-epoch|config-epoch|leader-epoch|known-replica|known-sentinel)( |$)'
    else
        keep='^sentinel (myid|current-epoch|known-sentinel)( |$)'
        log "the primary changed from $recorded: dropping the recorded epochs and replicas of $recorded"
    fi
    state=$(grep -iE "$keep" "$conf" | grep -vF " $me $SENTINEL_PORT " \
        | awk -v primary="$primary" -v port="$REDIS_PORT" \
            '!(tolower($2) == "known-replica" && $4 == primary && $5 == port)' || true)
fi

tmp=$conf.new
{
    echo "# Written by start-sentinel.sh at every start; the Sentinel adds what it learns."
    echo "port $SENTINEL_PORT"
    echo "bind $SENTINEL_BIND"
    echo "protected-mode no"
    echo "daemonize no"
    echo 'logfile ""'
    echo "dir $SENTINEL_DIR"
    echo "sentinel resolve-hostnames yes"
    echo "sentinel announce-hostnames yes"
    echo "sentinel announce-ip $me"
    echo "sentinel announce-port $SENTINEL_PORT"
    echo "sentinel monitor $MASTER_NAME $primary $REDIS_PORT $QUORUM"
    echo "sentinel down-after-milliseconds $MASTER_NAME $DOWN_AFTER_MS"
    echo "sentinel failover-timeout $MASTER_NAME $FAILOVER_TIMEOUT_MS"
    echo "sentinel parallel-syncs $MASTER_NAME $PARALLEL_SYNCS"
    if [ -n "${REDIS_PASSWORD:-}" ]; then
        echo "sentinel auth-pass $MASTER_NAME $REDIS_PASSWORD"
    fi
    if [ -n "$state" ]; then
        echo "$state"
    fi
} > "$tmp"
mv "$tmp" "$conf"
log "monitoring $MASTER_NAME at $primary:$REDIS_PORT (quorum $QUORUM), announced as $me"
exec "$REDIS_SERVER" "$conf" --sentinel
