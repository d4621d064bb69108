#!/bin/sh
# start-redis.sh: how a data pod of the replicated Redis (redis.replication.enabled) starts: as the primary
# or as a replica of it. Mounted from the chart's ConfigMap; run by the `redis` container of every pod of
# the StatefulSet. Static text: everything pod- or release-specific comes from the environment.
#
# Redis keeps no replication role of its own across a restart here (its config file is a read-only
# ConfigMap: Sentinel's CONFIG REWRITE after a failover cannot persist), so every start decides it:
#
#   1. Ask the Sentinels of the OTHER pods which node is the primary (SENTINEL GET-MASTER-ADDR-BY-NAME),
#      retrying for up to DISCOVERY_SECONDS; the address most of them name wins. Not this pod's own
#      Sentinel: it died with this pod, so it may still name this pod after a failover it did not see.
#      - It names this pod: start as the primary (a quick restart the Sentinels did not fail over; the
#        AOF, fsynced on every write, holds everything acknowledged). Unless this pod's volume is empty
#        while another node holds replicated data (a lost or replaced volume): then refuse to start
#        (exit 1). While this pod stays down the Sentinels fail over to a replica that has the data, and
#        the next start follows it instead of wiping every replica with an empty primary.
#      - It names another node: start as its replica.
#   2. No other Sentinel answered: ask the other data nodes (ROLE); one that is a primary is followed.
#   3. Nobody else is up: a first install. Pod 0 is the primary, every other pod starts as its replica.
#      (Also a pod 0 restarted while every other pod is gone: it comes back as a primary from its own
#      AOF, but with min-replicas-to-write 1 it takes no write until a replica follows it, and replicas
#      follow whatever the Sentinels name, so it cannot take writes the Sentinels' primary does not see.)
#
# A restarted old primary therefore comes back as a replica of the node the Sentinels promoted, never as
# a second primary. The Sentinels correct any node that still follows a wrong primary later on
# (+fix-slave-config, +convert-to-slave).
#
# Environment:
#   POD_NAME          this pod's name, <statefulset>-<ordinal> (downward API)
#   REDIS_NODES       the address of every data pod, space-separated, in ordinal order (the chart: the
#                     pods' stable DNS names through the headless Service); announced as
#                     replica-announce-ip, so a node's address survives its pod being rescheduled
#   MASTER_NAME       the name the Sentinels monitor the primary under
#   REDIS_PORT, SENTINEL_PORT   6379 and 26379 unless set
#   REDIS_PASSWORD    requirepass and masterauth, if set; REDISCLI_AUTH (the same) lets redis-cli ask
#                     the other data nodes
#   REDIS_CONF        redis.conf (/etc/redis/redis.conf)
#   REDIS_DATA_DIR    Redis's `dir` (/data): no AOF or RDB file there means this node holds no data yet
#   DISCOVERY_SECONDS how long to ask the other Sentinels before going on to 2. (15)
#   REDIS_SERVER      the redis-server to exec (redis-server)
set -eu

REDIS_PORT=${REDIS_PORT:-6379}
SENTINEL_PORT=${SENTINEL_PORT:-26379}
REDIS_CONF=${REDIS_CONF:-/etc/redis/redis.conf}
REDIS_DATA_DIR=${REDIS_DATA_DIR:-/data}
DISCOVERY_SECONDS=${DISCOVERY_SECONDS:-15}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
: "${POD_NAME:?}" "${REDIS_NODES:?}" "${MASTER_NAME:?}"

log() { echo "start-redis: $*" >&2; }

ordinal=${POD_NAME##*-}
# shellcheck disable=SC2086
set -- $REDIS_NODES
pod0=$1
shift "$ordinal"
me=$1

# The other data nodes' addresses, one a line.
others() {
    for node in $REDIS_NODES; do
        [ "$node" = "$me" ] || echo "$node"
    done
}

# The primary the other pods' Sentinels name (the most named), or nothing. Sentinels take no password.
ask_sentinels() {
    others | while read -r node; do
        env -u REDISCLI_AUTH timeout 3 redis-cli -h "$node" -p "$SENTINEL_PORT" --raw \
            SENTINEL GET-MASTER-ADDR-BY-NAME "$MASTER_NAME" 2>/dev/null | head -n 1 || true
    done | grep -v '^$' | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }'
}

# A reachable other data node whose ROLE is master, or nothing.
ask_nodes() {
    others | while read -r node; do
        role=$(timeout 3 redis-cli -h "$node" -p "$REDIS_PORT" --raw ROLE 2>/dev/null | head -n 1 || true)
        if [ "$role" = "master" ]; then
            echo "$node"
            break
        fi
    done
}

# Whether another data node holds replicated data (master_repl_offset > 0).
others_hold_data() {
    others | while read -r node; do
        offset=$(timeout 3 redis-cli -h "$node" -p "$REDIS_PORT" --raw INFO replication 2>/dev/null \
            | tr -d '\r' | awk -F: '$1 == "master_repl_offset" { print $2 }' || true)
        if [ -n "$offset" ] && [ "$offset" -gt 0 ]; then
            echo "$node"
            break
        fi
    done
}

primary=""
deadline=$(( $(date +%s) + DISCOVERY_SECONDS ))
while :; do
    primary=$(ask_sentinels)
    if [ -n "$primary" ]; then
        log "the other Sentinels name $primary as the primary"
        break
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        break
    fi
    sleep 1
done
if [ -z "$primary" ]; then
    primary=$(ask_nodes)
    if [ -n "$primary" ]; then
        log "no other Sentinel answers; data node $primary is a primary"
    else
        primary=$pod0
        log "no other Sentinel or data node answers: a first install, pod 0 ($pod0) is the primary"
    fi
fi

# Redis's own files (a volume may also hold lost+found, and the Sentinel's directory).
holds_data() {
    [ -e "$REDIS_DATA_DIR/appendonlydir" ] || [ -e "$REDIS_DATA_DIR/appendonly.aof" ] || [ -e "$REDIS_DATA_DIR/dump.rdb" ]
}

if [ "$primary" = "$me" ] && ! holds_data; then
    holder=$(others_hold_data)
    if [ -n "$holder" ]; then
        log "named the primary, but this node's $REDIS_DATA_DIR is empty while $holder holds replicated data" \
            "(a lost volume?): not starting as an empty primary; the Sentinels fail over while this pod is down"
        exit 1
    fi
fi

set -- "$REDIS_CONF" --replica-announce-ip "$me"
if [ -n "${REDIS_PASSWORD:-}" ]; then
    set -- "$@" --requirepass "$REDIS_PASSWORD" --masterauth "$REDIS_PASSWORD"
fi
if [ "$primary" = "$me" ]; then
    log "starting as the primary ($me)"
else
    log "starting as a replica of $primary"
    set -- "$@" --replicaof "$primary" "$REDIS_PORT"
fi
exec "$REDIS_SERVER" "$@"
