"""Rebuilding a lost replay log from Kafka, and ``sparkwire rebuild`` (the same for an operator).

The aggregator's sink calls :class:`HistoryRebuilder` itself when it finds the log gone (an epoch it did
not write to, or none while its checkpoint has batches); an operator runs ``sparkwire rebuild`` with the
aggregator's settings, the aggregator stopped (one writer per stream). Both: read the checkpoint's
offsets log (``checkpoint.py``), ask Kafka what it still holds, plan (``rebuild_plan.py``), open the
rebuild in the meta hash (``mark_rebuild.lua``: the epoch, and what is lost), recompute
(``recompute.py``) and commit each batch's results under the query id ``rebuild:<query id>``, fenced on
that epoch. Past retention, what can be rebuilt exactly is, the rest is an error, a counter
(``sparkwire_aggregator_rebuild_unavailable_total``) and ``history_lost`` in the meta hash.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

import redis

from sparkwire import logs
from sparkwire.aggregator import metrics
from sparkwire.aggregator.checkpoint import read_history
from sparkwire.aggregator.rebuild_plan import RebuildPlan, plan_rebuild
from sparkwire.aggregator.sink import REBUILD_QUERY_PREFIX
from sparkwire.options import add_option, non_negative_int, positive_int
from sparkwire.replaylog.writer import ReplayLogWriter

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
    def __init__(self, bootstrap_servers: str, topic: str, checkpoint: str, window_ms: int,
                 watermark_delay_ms: int) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.checkpoint = checkpoint
        self.window_ms = window_ms
        self.watermark_delay_ms = watermark_delay_ms

    def plan(self, upto: int | None = None) -> RebuildPlan:
        """``upto`` None: everything the commit log says is done."""
        history = read_history(self.checkpoint, self.topic)
        earliest = earliest_offsets(self.bootstrap_servers, self.topic)
        return plan_rebuild(history, history.committed + 1 if upto is None else upto, earliest,
                            self.watermark_delay_ms)

    def __call__(self, spark: Any, writer: ReplayLogWriter, upto: int | None = None) -> RebuildReport:
        from sparkwire.aggregator.recompute import recompute

        started = time.perf_counter()
        plan = self.plan(upto)
        if not plan.complete:
            metrics.REBUILD_UNAVAILABLE.inc()
            log.error("history past retention: windows starting at or before %s ms cannot be rebuilt",
                      plan.lost_before_ms, extra={"fields": {
                          "event": "rebuild_unavailable", "lostBeforeMs": plan.lost_before_ms,
                          "lostRecords": plan.lost_records, "purgedBefore": plan.purged_before,
                          "shortfalls": [vars(s) for s in plan.shortfalls]}})
        epoch = writer.mark_rebuild(plan.lost_before_ms, plan.lost_records)
        by_batch = recompute(spark, self.bootstrap_servers, plan, self.window_ms, self.watermark_delay_ms)
        appended = duplicates = 0
        for batch_id in sorted(by_batch):
            result = writer.commit_batch(rebuild_query_id(plan.query_id), batch_id, by_batch[batch_id], fence=epoch)
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "--bootstrap-servers", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    add_option(parser, "--topic", default="metrics-raw", help="Kafka topic of raw metric events")
    add_option(parser, "--redis-url", default="redis://127.0.0.1:6379/0", help="Redis holding the replay log")
    add_option(parser, "--stream", default="metrics", help="replay-log stream name")
    add_option(parser, "--retention", type=positive_int, default=100_000, help="entries kept in the replay log")
    add_option(parser, "--chunk-size", type=positive_int, default=500, help="records per commit-script call")
    add_option(parser, "--checkpoint", default=".run/checkpoints/aggregator",
               help="the aggregator's Spark checkpoint directory (its --checkpoint)")
    add_option(parser, "--window-ms", type=positive_int, default=10_000, help="the aggregator's --window-ms")
    add_option(parser, "--watermark-delay-ms", type=non_negative_int, default=5_000,
               help="the aggregator's --watermark-delay-ms")
    add_option(parser, "--upto-batch", type=non_negative_int, default=0,
               help="rebuild the results of the batches below this one; 0: every batch the checkpoint's "
                    "commit log holds")
    add_option(parser, "--shuffle-partitions", type=positive_int, default=2, help="spark.sql.shuffle.partitions")
    add_option(parser, "--master", default="local[2]", help="Spark master; empty to leave it to spark-submit")
    add_option(parser, "--spark-jars", default="", help="directory of the Kafka connector jars")
    add_option(parser, "--log-level", default="WARNING", help="log level")


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the whole history was rebuilt, 3 when part of it is past retention, 1 on failure."""
    from sparkwire.aggregator.job import spark_session

    logs.configure(args.log_level)
    writer = ReplayLogWriter(redis.Redis.from_url(args.redis_url), args.stream, retention=args.retention,
                             chunk_size=args.chunk_size)
    rebuilder = HistoryRebuilder(args.bootstrap_servers, args.topic, args.checkpoint, args.window_ms,
                                 args.watermark_delay_ms)
    spark = spark_session(args, "sparkwire-rebuild")
    try:
        report = rebuilder(spark, writer, args.upto_batch or None)
    finally:
        spark.stop()
    for line in report.lines():
        print(f"sparkwire rebuild: {line}", file=sys.stdout if not line.startswith("ERROR") else sys.stderr)
    return 0 if report.plan.complete else 3
