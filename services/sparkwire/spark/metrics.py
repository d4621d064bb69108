"""Prometheus metrics of a driver delivering queries: every job's (``sparkwire_job_*``: its Kafka lag, its replay
log's writer, rebuilds), the sink's (``sparkwire_sink_*``), every delivered query's (``sparkwire_query_*``,
labelled by query), and the built-in metrics job's own (``sparkwire_aggregator_*``: its events and windows, which
a team's job does not export). A job's metrics Service (its scrape ``job`` label) tells the jobs apart."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram

from sparkwire.replaylog.writer import CommitEvents

log = logging.getLogger(__name__)

INPUT_ROWS = Counter("sparkwire_aggregator_input_rows", "Kafka records read by the aggregation query")
MALFORMED_RECORDS = Counter(
    "sparkwire_aggregator_malformed_records",
    "Records that are not valid events: sent to the dead-letter topic, or skipped where there is none"
)
DUPLICATE_EVENTS = Counter(
    "sparkwire_aggregator_duplicate_events_dropped", "Input events dropped as repeats of an eventId"
)
LATE_EVENTS = Counter(
    "sparkwire_aggregator_late_rows_dropped", "Rows dropped by a stateful operator for being behind the watermark"
)
WINDOW_ROWS_AFTER_CLOSE = Counter(
    "sparkwire_aggregator_window_rows_after_close",
    "Partial aggregates of windows the sink had already closed, dropped (never expected: Spark drops their events "
    "as late)",
)
# Per streaming query (its name, or its id when it has none), for every query sparkwire delivers: a team's own
# and the metrics job's. A row behind Spark's watermark is dropped by a stateful operator without a trace in
# the results; with a lagging Kafka partition, on-time rows can be (docs/deliver-your-own-query.md).
QUERY_INPUT_ROWS = Counter("sparkwire_query_input_rows", "Rows read by a delivered streaming query", ["query"])
QUERY_ROWS_DROPPED_BY_WATERMARK = Counter(
    "sparkwire_query_rows_dropped_by_watermark",
    "Rows a delivered query's stateful operators dropped as behind Spark's watermark (numRowsDroppedByWatermark "
    "of the query progress): events missing from the results", ["query"],
)
KAFKA_OFFSETS_BEHIND = Gauge(
    "sparkwire_job_kafka_offsets_behind",
    "Kafka records not read yet, on the query's most lagging partition (Spark's maxOffsetsBehindLatest)", ["query"],
)
BATCHES = Counter("sparkwire_sink_batches", "Micro-batches handed to the sink", ["outcome"])
RECORDS_COMMITTED = Counter("sparkwire_sink_records_committed", "Results appended to the replay log")
DUPLICATES_SUPPRESSED = Counter(
    "sparkwire_sink_duplicates_suppressed", "Results not appended because their processingId was already there"
)
CHUNKS_REPLAYED = Counter(
    "sparkwire_sink_chunks_replayed", "Chunks of a batch already committed before (re-run after a crash)"
)
COMMIT_SECONDS = Histogram(
    "sparkwire_sink_commit_seconds", "Time to commit one micro-batch to the replay log",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
ROWS_SKIPPED = Counter(
    "sparkwire_sink_rows_skipped",
    "Result rows not delivered because every key column is null: no result (e.g. the metrics job's heartbeat "
    "windows); a partly null key is a result, and delivered", ["stream"],
)
RELAY_DEAD_LETTERS = Counter(
    "sparkwire_relay_dead_letters",
    "Relay-topic messages of a real-time stream that are not rows of its query (not written by its sink), "
    "written to sparkwire-relay.<stream>.dead-letter instead of the log", ["stream"],
)
LAST_SEQ = Gauge("sparkwire_sink_last_seq", "Last seq committed to the replay log")
REBUILDS = Counter(
    "sparkwire_job_rebuilds", "Rebuilds of a lost replay log from Kafka, by outcome (complete, partial)",
    ["outcome"],
)
REBUILD_UNAVAILABLE = Counter(
    "sparkwire_job_rebuild_unavailable",
    "Rebuilds that could not restore the whole lost history (input past Kafka's retention or the checkpoint's)",
)
REBUILD_RECORDS = Counter("sparkwire_job_rebuild_records", "Results re-committed by rebuilds")
TAIL_LOSSES = Counter(
    "sparkwire_job_tail_losses",
    "Replay logs found to have lost their last batches under the same epoch (a failover, a restore): each starts "
    "a new epoch and a rebuild",
)
NOT_REPLICATED = Counter(
    "sparkwire_job_not_replicated",
    "Commit steps (a staged batch, a publish) that fewer replicas than --redis-replicas acknowledged within the "
    "replica timeout (Redis WAIT); each is retried, for 30 s, before the batch fails",
)
BATCHES_REPUBLISHED = Counter(
    "sparkwire_job_batches_republished",
    "Batches published again after their publish failed (reply lost, or not replicated) and the Redis then "
    "answering did not have it: a failover to a replica that lacked the publish; same seqs and bytes, from the "
    "staged chunks. Also counts a first try that never reached Redis",
)
REDIS_RETRIES = Counter(
    "sparkwire_job_redis_retries",
    "Replay-log calls sent again after a transient Redis error (connection reset or refused, timeout, a failover "
    "under way), in process, for up to 30 s: a blip costs a retry, not a driver restart",
)
REDIS_REPLICAS_REQUIRED = Gauge(
    "sparkwire_job_redis_replicas_required",
    "Replicas the writer waits for before a batch is published and before Spark moves on (--redis-replicas); "
    "with fewer online the job cannot commit",
)


class WriterMetrics(CommitEvents):
    """The replay-log writer's retries and replication events, counted (retries also logged)."""

    def retrying(self, error: BaseException, attempt: int) -> None:
        REDIS_RETRIES.inc()
        log.warning("replay log call failed, retrying: %s", error, extra={"fields": {
            "event": "redis_retry", "attempt": attempt, "error": type(error).__name__}})

    def not_replicated(self, acknowledged: int, required: int) -> None:
        NOT_REPLICATED.inc()

    def republished(self, query_id: str, batch_id: int) -> None:
        BATCHES_REPUBLISHED.inc()
