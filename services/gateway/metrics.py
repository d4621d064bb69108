"""Prometheus metrics of a gateway pod (prefix ``sparkwire_``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CONNECTIONS = Gauge("sparkwire_gateway_connections", "Open WebSocket connections", ["stream"])
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
SLOW_CONSUMER_CLOSES = Counter(
    "sparkwire_gateway_slow_consumer_closes", "Connections closed because their send queue overflowed", ["stream"]
)
CLOSES = Counter("sparkwire_gateway_closes", "Connections closed by the server, by close code", ["code"])
GATEWAY_DUPLICATES = Counter(
    "sparkwire_gateway_duplicates_suppressed",
    "Entries not sent because the connection had already sent their seq (replay/live overlap)", ["stream"],
)
GAPS_DETECTED = Counter("sparkwire_gateway_gaps_detected", "Holes in seq seen by the gateway", ["stream"])
SINK_DUPLICATES = Gauge(
    "sparkwire_sink_duplicates_suppressed_in_log",
    "duplicates_suppressed from the stream's meta hash (results the sink refused to append twice)", ["stream"],
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
