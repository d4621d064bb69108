"""The ``foreachBatch`` sink: one micro-batch -> one exactly-once commit into the replay log.

Users who start the query themselves pass a :class:`ReplayLogSink` to ``foreachBatch`` and call
:meth:`ReplayLogSink.bind_query` with the query's id (``sparkwire.spark.sink_for`` builds one).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

from sparkwire.replaylog import BatchCommit, ChunkResult, Record, ReplayLogWriter
from sparkwire.replaylog.writer import EpochFenced, TailLost
from sparkwire.spark import metrics
from sparkwire.spark.delivery.faults import FaultInjector
from sparkwire.spark.results.encoding import prepare
from sparkwire.spark.results.records import ResultEncoder

log = logging.getLogger(__name__)

# Losses of the log in a row while committing one batch (each followed by a rebuild) before giving up;
# the query then fails and the supervisor restarts the driver, which checks the log again.
_LOSS_ATTEMPTS = 3
REBUILD_QUERY_PREFIX = "rebuild:"  # rebuild.rebuild_query_id: the rebuild commits under it


class Rebuilt(Protocol):
    @property
    def epoch(self) -> str: ...


class Rebuilder(Protocol):
    """Recommits the results of batches below ``upto`` into the stream (``rebuild.HistoryRebuilder``);
    ``lost_tail_of``: the epoch of a log that lost its tail, which the rebuild replaces."""

    def __call__(self, spark: Any, writer: ReplayLogWriter, upto: int | None = None,
                 lost_tail_of: str = "") -> Rebuilt: ...

class ReplayLogSink:
    """Called by Spark with each micro-batch of window results and its ``batchId``.

    The batch marker is keyed by the streaming query id, known only once the query has started, so the
    first batch waits for :meth:`bind_query` (a moment after ``start()`` returns).
    """

    def __init__(self, writer: ReplayLogWriter, encoder: ResultEncoder, faults: FaultInjector,
                 rebuilder: Rebuilder | None = None, descriptor: str = "", rebuild_unavailable: str = "") -> None:
        self.writer = writer
        self.encoder = encoder
        self.faults = faults
        self.rebuilder = rebuilder
        self.descriptor = descriptor
        # Why a lost log cannot be rebuilt, when ``rebuilder`` is None (said whenever it happens).
        self.rebuild_unavailable = rebuild_unavailable or "no rebuilder was given"
        self._query_id: str | None = None
        self._bound = threading.Event()
        # The epoch this driver last wrote to or found, which every commit is fenced on; None until its
        # first batch has looked at the log.
        self._epoch: str | None = None
        self._skip_logged = False

    def bind_query(self, query_id: str) -> None:
        self._query_id = query_id
        self._bound.set()

    def __call__(self, batch: Any, batch_id: int) -> None:
        if not self._bound.wait(timeout=120):
            raise RuntimeError("the streaming query id was never bound to the sink")
        assert self._query_id is not None
        started = time.perf_counter()
        records = self.batch_records(batch, batch_id)
        collected = time.perf_counter()
        self.faults.reached("before-commit", batch_id)
        if self.descriptor and self._epoch is None:
            self.writer.put_descriptor(self.descriptor)
        result = self._commit(batch, batch_id, records)
        self.batch_committed(batch_id)
        self.faults.reached("after-commit", batch_id)
        self._report(result, len(records), time.perf_counter() - started, collected - started)

    def batch_records(self, batch: Any, batch_id: int) -> list[Record]:
        """The records of one micro-batch: its rows, encoded (a subclass may make them otherwise)."""
        rows = prepare(batch).collect()  # runs the batch's plan: Kafka, parse, state
        encoded = self.encoder.encode(rows, revision=batch_id)
        if encoded.skipped:
            stream = self.encoder.spec.stream
            metrics.ROWS_SKIPPED.labels(stream=stream).inc(encoded.skipped)
            if not self._skip_logged:  # once per query: a query with such rows has them in most batches
                self._skip_logged = True
                log.warning("stream %s: rows whose key columns %s are all null are no results and are not "
                            "delivered; counted in sparkwire_sink_rows_skipped_total, not logged again",
                            stream, list(self.encoder.spec.keys), extra={"fields": {
                                "event": "rows_skipped", "stream": stream, "batchId": batch_id,
                                "rows": encoded.skipped}})
        return encoded.records

    def batch_committed(self, batch_id: int) -> None:
        """Called once the batch is in the log (committed now or found there)."""

    def _commit(self, batch: Any, batch_id: int, records: list[Record]) -> BatchCommit:
        """Commit the batch after the history it follows: when the log was lost (fenced: another epoch
        or none) or lost its tail (a failover kept the epoch, not the last batches), the results of the
        batches before this one are rebuilt first, in a new epoch, so that this batch's results get higher
        seqs than the windows they follow."""
        assert self._query_id is not None
        for _attempt in range(_LOSS_ATTEMPTS):
            if self._epoch is None:
                self._epoch = self._first_epoch(batch, batch_id)
            try:
                result = self.writer.commit_batch(
                    self._query_id, batch_id, records, fence=self._epoch, ordered=True,
                    between_chunks=lambda _i, _r: self._between_chunks(batch_id),
                )
            except EpochFenced as fenced:
                log.warning("replay log lost", extra={"fields": {
                    "event": "log_lost", "batchId": batch_id, "expectedEpoch": fenced.expected,
                    "foundEpoch": fenced.found}})
                self._epoch = self._after_loss(batch, batch_id, fenced.found)
                continue
            except TailLost as lost:
                metrics.TAIL_LOSSES.inc()
                log.error("replay log lost its tail: %s", lost, extra={"fields": {
                    "event": "tail_lost", "batchId": batch_id, "epoch": lost.epoch, "lastBatch": lost.last_batch}})
                self._epoch = self._rebuild(batch, batch_id, lost_tail_of=lost.epoch)
                continue
            self._epoch = result.chunks[-1].epoch
            return result
        raise RuntimeError(f"batch {batch_id}: the replay log was lost {_LOSS_ATTEMPTS} times while committing it")

    def rebuild_if_lost(self, spark: Any, last_committed: int) -> None:
        """Before the query starts, on a checkpoint whose commit log ends at ``last_committed`` (-1: none):
        a stream without an epoch was lost while the driver was down, and is rebuilt now. Spark runs no
        micro-batch after a restart until new input arrives, so the first batch's check alone
        (``_first_epoch``) would leave a quiet stream's clients with an empty log until its next event."""
        if last_committed < 0 or self._epoch is not None or not self.rebuild_before_start:
            return
        epoch, _query = self.writer.stream_epoch()
        if epoch:
            return  # not lost: the first batch fences on it as before
        log.warning("replay log lost while the driver was down: rebuilt before the query starts", extra={
            "fields": {"event": "log_lost_at_start", "lastCommittedBatch": last_committed}})
        self._epoch = self._rebuild_in(spark, last_committed + 1)

    # Whether ``rebuild_if_lost`` rebuilds before the start; a sink whose rebuild needs what its first batch
    # reads (the metrics job's window states: its heartbeat source runs a batch at once) leaves it to that.
    rebuild_before_start = True

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

    def _rebuild(self, batch: Any, batch_id: int, lost_tail_of: str = "") -> str:
        return self._rebuild_in(batch.sparkSession, batch_id, lost_tail_of)

    def _rebuild_in(self, spark: Any, batch_id: int, lost_tail_of: str = "") -> str:
        """The history before ``batch_id`` recommitted into a new epoch; or, when it cannot be rebuilt, a new
        epoch that says so (``history_lost`` in the meta hash, an error log, a counter): never silence.
        ``lost_tail_of``: the epoch of a log that lost its tail (its entries stay, the epoch is replaced)."""
        if self.rebuilder is None:
            metrics.REBUILD_UNAVAILABLE.inc()
            log.error("replay log lost and cannot be rebuilt: %s; the results of batches before %s are gone",
                      self.rebuild_unavailable, batch_id, extra={"fields": {
                          "event": "rebuild_unavailable", "batchId": batch_id, "reason": self.rebuild_unavailable}})
            epoch = self.writer.mark_rebuild(int(time.time() * 1000), 0, lost_tail_of=lost_tail_of)
        else:
            epoch = self.rebuilder(spark, self.writer, batch_id, lost_tail_of).epoch
        if self.descriptor:
            self.writer.put_descriptor(self.descriptor)
        return epoch

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


__all__ = ["ChunkResult", "Record", "ReplayLogSink"]
