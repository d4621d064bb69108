"""The ``foreachBatch`` sink: one micro-batch -> one exactly-once commit into the replay log."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from sparkwire.aggregator import metrics
from sparkwire.aggregator.faults import FaultInjector
from sparkwire.replaylog import BatchCommit, ChunkResult, Record, ReplayLogWriter

log = logging.getLogger(__name__)

PAYLOAD_FIELDS = ("metricName", "windowStart", "windowEnd", "count", "sum", "min", "max", "avg")


def is_heartbeat_window(row: dict[str, Any]) -> bool:
    """The row of a window's heartbeats, which belong to no metric (``pipeline.window_results``)."""
    return row["metricName"] is None


def to_record(row: dict[str, Any]) -> Record:
    payload = {name: row[name] for name in PAYLOAD_FIELDS}
    payload["processingId"] = row["processingId"]
    return Record(
        processing_id=row["processingId"],
        key=row["metricName"],
        payload=json.dumps(payload, separators=(",", ":"), sort_keys=True),
    )


class ReplayLogSink:
    """Called by Spark with each micro-batch of window results and its ``batchId``.

    The batch marker is keyed by the streaming query id, known only once the query has started, so the
    first batch waits for :meth:`bind_query` (a moment after ``start()`` returns).
    """

    def __init__(self, writer: ReplayLogWriter, faults: FaultInjector) -> None:
        self.writer = writer
        self.faults = faults
        self._query_id: str | None = None
        self._bound = threading.Event()

    def bind_query(self, query_id: str) -> None:
        self._query_id = query_id
        self._bound.set()

    def __call__(self, batch: Any, batch_id: int) -> None:
        if not self._bound.wait(timeout=120):
            raise RuntimeError("the streaming query id was never bound to the sink")
        assert self._query_id is not None
        started = time.perf_counter()
        rows = [row.asDict() for row in batch.collect()]
        records = [to_record(row) for row in rows if not is_heartbeat_window(row)]
        self.faults.reached("before-commit", batch_id)
        result = self.writer.commit_batch(
            self._query_id, batch_id, records, between_chunks=lambda _i, _r: self._between_chunks(batch_id)
        )
        self.faults.reached("after-commit", batch_id)
        self._report(result, len(records), time.perf_counter() - started)

    def _between_chunks(self, batch_id: int) -> None:
        self.faults.reached("mid-batch", batch_id)

    def _report(self, result: BatchCommit, rows: int, seconds: float) -> None:
        replayed = result.replayed_chunks == len(result.chunks)
        metrics.BATCHES.labels(outcome="replayed" if replayed else "committed").inc()
        metrics.RECORDS_COMMITTED.inc(result.appended)
        metrics.DUPLICATES_SUPPRESSED.inc(result.duplicates)
        metrics.CHUNKS_REPLAYED.inc(result.replayed_chunks)
        metrics.COMMIT_SECONDS.observe(seconds)
        metrics.LAST_SEQ.set(result.last_seq)
        log.info(
            "batch committed",
            extra={"fields": {
                "event": "sink_commit", "batchId": result.batch_id, "rowsOut": rows,
                "appended": result.appended, "duplicates": result.duplicates,
                "replayedChunks": result.replayed_chunks, "chunks": len(result.chunks),
                "lastSeq": result.last_seq, "commitMs": round(seconds * 1000, 2),
            }},
        )


__all__ = ["ChunkResult", "ReplayLogSink", "to_record"]
