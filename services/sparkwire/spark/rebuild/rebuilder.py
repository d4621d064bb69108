"""Rebuilding a lost replay log from Kafka.

The sink calls :class:`HistoryRebuilder` itself when it finds the log gone (an epoch it did not write to,
or none while its checkpoint has batches); an operator runs ``sparkwire rebuild`` (the metrics job) or
``python <job file> rebuild`` (a job run by ``sparkwire.spark.main``), the job stopped (one writer per
stream). Both: read the checkpoint's
offsets log (``checkpoint.py``), ask Kafka what it still holds, plan (``plan.py``), open the
rebuild in the meta hash (``mark_rebuild.lua``: the epoch, and what is lost), recompute
(``recompute.py``) and commit each batch's results under the query id ``rebuild:<query id>``, fenced on
that epoch. Past retention, what can be rebuilt exactly is, the rest is an error, a counter
(``sparkwire_job_rebuild_unavailable_total``) and ``history_lost`` in the meta hash.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkwire.replaylog.writer import ReplayLogWriter
from sparkwire.spark import metrics
from sparkwire.spark.delivery.sink import REBUILD_QUERY_PREFIX
from sparkwire.spark.rebuild.checkpoint import read_history
from sparkwire.spark.rebuild.plan import RebuildPlan, plan_rebuild
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.source import SourceQuery

log = logging.getLogger(__name__)



def rebuild_query_id(query_id: str) -> str:
    return REBUILD_QUERY_PREFIX + query_id


def earliest_offsets(bootstrap_servers: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """The first offset Kafka still holds, per partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "sparkwire-rebuild",
                         "enable.auto.commit": False})
    try:
        described = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if described is None or described.error is not None:
            raise RuntimeError(f"Kafka topic {topic!r} not found: {described.error if described else None}")
        return {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[0])
                for p in sorted(described.partitions)}
    finally:
        consumer.close()


@dataclass(frozen=True)
class RebuildReport:
    plan: RebuildPlan
    epoch: str
    batches: int
    appended: int
    duplicates: int
    seconds: float

    def lines(self) -> list[str]:
        plan = self.plan
        span = (f"batches {plan.batches[0].batch_id}..{plan.batches[-1].batch_id}" if plan.batches
                else "no batch")
        records = sum(b.records() for b in plan.batches)
        lines = [
            f"query {plan.query_id}, topic {plan.topic}: rebuilt the results of batches below {plan.upto} "
            f"into epoch {self.epoch}",
            f"recomputed {span} ({records} Kafka records), windows ending at or before watermark "
            f"{plan.emit_watermark_ms}",
            f"committed {self.batches} batches: {self.appended} results appended, {self.duplicates} already in "
            f"the log; {self.seconds:.1f} s",
        ]
        if plan.complete:
            lines.append("history complete: every result of those batches is in the log")
        else:
            lines.append(f"ERROR history lost: windows starting at or before {plan.lost_before_ms} ms are missing "
                         "(meta hash: history_lost=1, history_lost_before_ms)")
            lines += [f"ERROR partition {s.partition}: offsets {s.needed}..{s.earliest - 1} are past Kafka's "
                      f"retention ({s.records} records of the rebuild's input)" for s in plan.shortfalls]
            if plan.purged_before is not None:
                lines.append(f"ERROR the checkpoint no longer has the offsets of batches before {plan.purged_before}")
        return lines


class HistoryRebuilder:
    """Rebuilds the stream of one :class:`~sparkwire.spark.source.SourceQuery` from its checkpoint (the
    query's own checkpoint directory, the one ``checkpointLocation`` names)."""

    def __init__(self, query: SourceQuery, encoder: ResultEncoder, checkpoint: str,
                 closed_upto: Callable[[], Mapping[int, int]] | None = None, window_ms: int | None = None) -> None:
        """``closed_upto``: for a job whose sink closes windows itself, each batch's bound, and ``window_ms``
        the length of its tumbling windows (``plan.py``'s module docstring); None for Spark's own output
        modes."""
        if closed_upto is not None and window_ms is None:
            # Refused here, when the job starts, rather than when a lost log needs the rebuild.
            raise ValueError("a sink that closes its windows itself needs window_ms for its rebuild: without it, "
                             "events the sink dropped as late would be counted")
        self.query = query
        self.encoder = encoder
        self.checkpoint = checkpoint
        self.closed_upto = closed_upto
        self.window_ms = window_ms

    def plan(self, upto: int | None = None) -> RebuildPlan:
        """``upto`` None: everything the commit log says is done."""
        source = self.query.source
        history = read_history(self.checkpoint, source.topic)
        earliest = earliest_offsets(source.bootstrap_servers, source.topic)
        return plan_rebuild(history, history.committed + 1 if upto is None else upto, earliest,
                            self.query.watermark_delay_ms, self.closed_upto() if self.closed_upto else None,
                            self.window_ms)

    def __call__(self, spark: Any, writer: ReplayLogWriter, upto: int | None = None,
                 lost_tail_of: str = "") -> RebuildReport:
        from sparkwire.spark.rebuild.recompute import recompute

        started = time.perf_counter()
        plan = self.plan(upto)
        if not plan.complete:
            metrics.REBUILD_UNAVAILABLE.inc()
            log.error("history past retention: windows starting at or before %s ms cannot be rebuilt",
                      plan.lost_before_ms, extra={"fields": {
                          "event": "rebuild_unavailable", "lostBeforeMs": plan.lost_before_ms,
                          "lostRecords": plan.lost_records, "purgedBefore": plan.purged_before,
                          "shortfalls": [vars(s) for s in plan.shortfalls]}})
        epoch = writer.mark_rebuild(plan.lost_before_ms, plan.lost_records, lost_tail_of=lost_tail_of)
        by_batch = recompute(spark, self.query, self.encoder, plan)
        appended = duplicates = 0
        for batch_id in sorted(by_batch):
            # consecutive=False: only the batches with results are recommitted, so their ids skip.
            result = writer.commit_batch(rebuild_query_id(plan.query_id), batch_id, by_batch[batch_id], fence=epoch,
                                         ordered=True, consecutive=False)
            appended += result.appended
            duplicates += result.duplicates
        report = RebuildReport(plan, epoch, len(by_batch), appended, duplicates, time.perf_counter() - started)
        metrics.REBUILDS.labels(outcome="complete" if plan.complete else "partial").inc()
        metrics.REBUILD_RECORDS.inc(appended)
        log.info("log rebuilt from Kafka", extra={"fields": {
            "event": "rebuild", "upto": plan.upto, "epoch": epoch, "batches": len(by_batch),
            "appended": appended, "duplicates": duplicates, "complete": plan.complete,
            "seconds": round(report.seconds, 2)}})
        return report
