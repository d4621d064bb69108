"""Prometheus metrics of a gateway pod (prefix ``sparkwire_``)."""

from __future__ import annotations

import functools
from typing import TypeVar

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

MetricT = TypeVar("MetricT", bound=MetricWrapperBase)


@functools.lru_cache(maxsize=4096)
def child(metric: MetricT, *values: str) -> MetricT:
    """``metric.labels(*values)``, looked up once: ``labels`` validates and locks on every call, and the
    handshake's and a connection's counters were looked up per connection (~2 % of a handshake's CPU when
    thousands connect at once). Label values here come from a closed set (streams, reasons, close codes)."""
    return metric.labels(*values)


CONNECTIONS = Gauge("sparkwire_gateway_connections", "Open client connections (WebSocket and SSE)", ["stream"])
CONNECTIONS_ACCEPTED = Counter(
    "sparkwire_gateway_accepted_connections", "Client connections accepted, by transport (websocket, sse)",
    ["stream", "transport"],
)
ENTRIES_DELIVERED = Counter("sparkwire_gateway_entries_delivered", "Entries sent to clients", ["stream"])
WRITTEN_THROUGH = Counter(
    "sparkwire_gateway_batches_written_through",
    "Live batches the hub wrote straight to a caught-up connection's socket (one per batch and connection)",
    ["stream"],
)
ENTRIES_REPLAYED = Counter(
    "sparkwire_gateway_entries_replayed", "Entries sent from history on (re)connect", ["stream", "source"]
)
RESETS = Counter("sparkwire_gateway_resets", "Connections started from a snapshot", ["stream", "reason"])
REWINDS = Counter("sparkwire_gateway_rewinds",
                  "Times this pod's reader saw the log go back in the same epoch (a new epoch declared for it)",
                  ["stream", "outcome"])
SLOW_CONSUMER_CLOSES = Counter(
    "sparkwire_gateway_slow_consumer_closes", "Connections closed because their send queue overflowed", ["stream"]
)
CLOSES = Counter("sparkwire_gateway_closes", "Connections closed by the server, by close code", ["code"])
CONNECTIONS_REFUSED = Counter(
    "sparkwire_gateway_refused_connections",
    "WebSocket upgrades and HTTP requests answered 503 because the pod held --max-connections",
    ["reason"],
)
BAD_INPUT = Counter(
    "sparkwire_gateway_bad_input",
    "Client input refused below the protocol, by kind (invalid_utf8: a text frame that is not UTF-8, closed "
    "1007; header_timeout: a connection without complete request headers in --header-timeout-ms, closed); the "
    "log has one line per kind per minute",
    ["kind"],
)
GATEWAY_DUPLICATES = Counter(
    "sparkwire_gateway_duplicates_suppressed",
    "Entries not sent because the connection had already sent their seq (replay/live overlap)", ["stream"],
)
GAPS_DETECTED = Counter("sparkwire_gateway_gaps_detected", "Holes in seq seen by the gateway", ["stream"])
# Under the gateway's prefix although the writers count it: the gateway reads it from the log (sparkwire_sink_*
# is what the Spark jobs export themselves).
SINK_DUPLICATES = Gauge(
    "sparkwire_gateway_log_duplicates_suppressed",
    "duplicates_suppressed from the stream's meta hash, as the gateway reads it (results the writers refused to "
    "append twice)", ["stream"],
)
CLIENT_DUPLICATES = Counter(
    "sparkwire_client_reported_duplicates", "Duplicates clients report having dropped, from their acks", ["stream"]
)
CLIENT_GAPS = Counter("sparkwire_client_reported_gaps", "Gaps clients report, from their acks", ["stream"])
DELIVERY_LATENCY = Histogram(
    "sparkwire_gateway_delivery_latency_seconds",
    "From commit (Redis clock) to send of the oldest entry of each live send to a client; for a batch the "
    "hub writes through to many clients at once, one observation: its last write",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
REDIS_ERRORS = Counter("sparkwire_gateway_redis_errors", "Failed Redis calls", ["operation"])
HEAD_SEQ = Gauge("sparkwire_gateway_head_seq", "Last seq this pod has read from the log", ["stream"])
# The Redis the gateway reads, from its primary's INFO replication (store/replication_watch.py), every few seconds.
# Every gateway pod reports the same Redis: alerts take the max over pods.
REDIS_REPLICAS_CONNECTED = Gauge(
    "sparkwire_redis_replicas_connected",
    "Replicas streaming from the Redis primary (state online): those that can acknowledge the writer's WAIT; "
    "0 for a Redis without replicas",
)
REDIS_REPLICATION_LAG_BYTES = Gauge(
    "sparkwire_redis_replication_lag_bytes",
    "The primary's replication offset minus the smallest offset an online replica acknowledged (replicas "
    "acknowledge about once a second, so up to a second of writes shows here normally)",
)
REDIS_REPLICATION_LAG_SECONDS = Gauge(
    "sparkwire_redis_replication_lag_seconds",
    "The largest lag an online replica reports: seconds since it last acknowledged the primary (0-1 when healthy)",
)
REDIS_PRIMARY_CHANGES = Counter(
    "sparkwire_redis_primary_changes",
    "Times the Redis primary's replication id (master_replid) differed from the one this pod saw last: a "
    "failover (a promoted replica starts a new replication id); a lone Redis restarted from disk takes a new "
    "one too",
)
