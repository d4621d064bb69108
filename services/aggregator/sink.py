"""The ``foreachBatch`` sink: one micro-batch -> one exactly-once commit into the replay log."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Protocol

from sparkwire.aggregator import metrics
from sparkwire.aggregator.faults import FaultInjector
from sparkwire.replaylog import BatchCommit, ChunkResult, Record, ReplayLogWriter
from sparkwire.replaylog.writer import EpochFenced

log = logging.getLogger(__name__)

# Losses of the log in a row while committing one batch (each followed by a rebuild) before giving up;
# the query then fails and the supervisor restarts the driver, which checks the log again.
_LOSS_ATTEMPTS = 3
REBUILD_QUERY_PREFIX = "rebuild:"  # rebuild.rebuild_query_id: the rebuild commits under it


class Rebuilt(Protocol):
    @property
    def epoch(self) -> str: ...


class Rebuilder(Protocol):
    """Recommits the results of batches below ``upto`` into the stream (``rebuild.HistoryRebuilder``)."""

    def __call__(self, spark: Any, writer: ReplayLogWriter, upto: int | None = None) -> Rebuilt: ...

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

    def __init__(self, writer: ReplayLogWriter, faults: FaultInjector, rebuilder: Rebuilder | None = None) -> None:
        self.writer = writer
        self.faults = faults
        self.rebuilder = rebuilder
        self._query_id: str | None = None
        self._bound = threading.Event()
        # The epoch this driver last wrote to or found, which every commit is fenced on; None until its
        # first batch has looked at the log.
        self._epoch: str | None = None

    def bind_query(self, query_id: str) -> None:
        self._query_id = query_id
        self._bound.set()

    def __call__(self, batch: Any, batch_id: int) -> None:
        if not self._bound.wait(timeout=120):
            raise RuntimeError("the streaming query id was never bound to the sink")
        assert self._query_id is not None
        started = time.perf_counter()
        rows = [row.asDict() for row in batch.collect()]  # runs the batch's plan: Kafka, parse, state
        collected = time.perf_counter()
        records = [to_record(row) for row in rows if not is_heartbeat_window(row)]
        self.faults.reached("before-commit", batch_id)
        result = self._commit(batch, batch_id, records)
        self.faults.reached("after-commit", batch_id)
        self._report(result, len(records), time.perf_counter() - started, collected - started)

    def _commit(self, batch: Any, batch_id: int, records: list[Record]) -> BatchCommit:
        """Commit the batch after the history it follows: when the log was lost (fenced: another epoch
        or none), the results of the batches before this one are rebuilt first, so that this batch's
        results get higher seqs than the windows they follow."""
        assert self._query_id is not None
        for _attempt in range(_LOSS_ATTEMPTS):
            if self._epoch is None:
                self._epoch = self._first_epoch(batch, batch_id)
            try:
                result = self.writer.commit_batch(
                    self._query_id, batch_id, records, fence=self._epoch,
                    between_chunks=lambda _i, _r: self._between_chunks(batch_id),
                )
            except EpochFenced as fenced:
                log.warning("replay log lost", extra={"fields": {
                    "event": "log_lost", "batchId": batch_id, "expectedEpoch": fenced.expected,
                    "foundEpoch": fenced.found}})
                self._epoch = self._after_loss(batch, batch_id, fenced.found)
                continue
            self._epoch = result.chunks[-1].epoch
            return result
        raise RuntimeError(f"batch {batch_id}: the replay log was lost {_LOSS_ATTEMPTS} times while committing it")

    def _first_epoch(self, batch: Any, batch_id: int) -> str:
        """The driver's first batch: a checkpoint with batches before this one and a log without an epoch
        means the log was lost while the driver was down."""
        epoch, _query = self.writer.stream_epoch()
        if epoch or batch_id == 0:
            return epoch
        return self._rebuild(batch, batch_id)

    def _after_loss(self, batch: Any, batch_id: int, found: str) -> str:
        """A new epoch that this query (or its rebuild) wrote to already holds the history: adopt it."""
        assert self._query_id is not None
        if found:
            _epoch, query = self.writer.stream_epoch()
            if query in (self._query_id, REBUILD_QUERY_PREFIX + self._query_id):
                return found
        return self._rebuild(batch, batch_id)

    def _rebuild(self, batch: Any, batch_id: int) -> str:
        if self.rebuilder is None:
            raise RuntimeError(f"batch {batch_id}: the replay log was lost and this sink has no rebuilder")
        return self.rebuilder(batch.sparkSession, self.writer, batch_id).epoch

    def _between_chunks(self, batch_id: int) -> None:
        self.faults.reached("mid-batch", batch_id)

    def _report(self, result: BatchCommit, rows: int, seconds: float, collect_seconds: float) -> None:
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
                "collectMs": round(collect_seconds * 1000, 2),
            }},
        )


__all__ = ["ChunkResult", "ReplayLogSink", "to_record"]
