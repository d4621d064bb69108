"""``sparkwire aggregate`` and ``sparkwire rebuild``: the built-in metrics job, Kafka -> windows -> replay log,
delivered through ``sparkwire.spark`` like any user's query (plus its dead-letter query, unless
``--dead-letter-topic ''``).

Exits non-zero whenever a query stops on its own (a streaming job never finishes), so a supervisor
(the Spark operator's restart policy, or a test) restarts it on the same checkpoint.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from typing import Any

from sparkwire import logs
from sparkwire.aggregator.window_state import WindowStateFiles
from sparkwire.options import add_option, non_negative_int, positive_int
from sparkwire.replaylog import Record
from sparkwire.spark import (
    AVAILABLE,
    QUICK_JIT,
    FaultInjector,
    HistoryRebuilder,
    Job,
    KafkaSource,
    ResultEncoder,
    SourceQuery,
    StreamSpec,
    Target,
    add_runtime_arguments,
    load_job,
    rebuild_job,
    serve,
    session,
    start,
    stop_on_signals,
)

AGGREGATE_QUERY = "sparkwire-aggregate"
_NEVER_ENOUGH = 2**62  # minOffsetsPerTrigger without a cap: batches are paced by time alone
_POLLING_MS = 100
# Longer than a Kafka leader failover (a broker's session timeout, an election, the producer's retry), which
# silences a partition that is not idle at all; a partition that keeps sending heartbeats is never idle.
DEFAULT_PARTITION_IDLE_MS = 60_000


def add_arguments(parser: argparse.ArgumentParser, *, java_options: str = QUICK_JIT) -> None:
    add_option(parser, "--bootstrap-servers", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    add_option(parser, "--topic", default="metrics-raw", help="Kafka topic of raw metric events")
    add_option(parser, "--dead-letter-topic", default="metrics-deadletter",
               help="Kafka topic that receives records that are not valid events; '' for none: they are then "
                    "only counted (sparkwire_aggregator_malformed_records_total), which saves the dead-letter "
                    "query's second Kafka read and parse of every record")
    add_option(parser, "--starting-offsets", default="earliest",
               help="where a new checkpoint starts reading (later runs resume from the checkpoint)")
    add_option(parser, "--max-offsets-per-trigger", type=non_negative_int, default=0,
               help="cap on Kafka records per micro-batch, 0 for none")
    add_option(parser, "--redis-url", default="redis://127.0.0.1:6379/0",
               help="Redis holding the replay log (redis:// or redis+sentinel://host:port,host:port/<master>)")
    add_option(parser, "--redis-replicas", type=non_negative_int, default=0,
               help="replicas that must hold each batch before it is published (Redis WAIT); 0 without replicas")
    add_option(parser, "--stream", default="metrics", help="replay-log stream name")
    add_option(parser, "--retention", type=positive_int, default=100_000, help="entries kept in the replay log")
    add_option(parser, "--chunk-size", type=positive_int, default=500,
               help="records per commit-script call (bounds how long one call blocks Redis)")
    add_option(parser, "--checkpoint", default=".run/checkpoints/aggregator",
               help="Spark checkpoint directory (offsets, state, commit log)")
    add_option(parser, "--window-ms", type=positive_int, default=10_000, help="tumbling window length")
    add_option(parser, "--watermark-delay-ms", type=non_negative_int, default=5_000,
               help="how late an event may arrive before its window is closed: a window closes once every "
                    "active Kafka partition has passed its end + this (docs/replay-log.md)")
    add_option(parser, "--partition-idle-ms", type=non_negative_int, default=DEFAULT_PARTITION_IDLE_MS,
               help="a Kafka partition from which no micro-batch has read a record for this long stops holding "
                    "windows open (logged); longer than a partition leader's failover, which silences it; 0: "
                    "never (a partition that stops sending then holds every window open)")
    add_option(parser, "--partition-skew-ms", type=non_negative_int, default=0,
               help="how far (event time) one partition may be read behind another without losing events: "
                    "Spark's dedup drops rows behind the newest event time of all partitions by more than "
                    "the delay plus this, and remembers each eventId that long; 0: twice --watermark-delay-ms")
    add_option(parser, "--trigger-ms", type=positive_int, default=500,
               help="a micro-batch starts once this long has passed since the previous one started (sooner "
                    "when --max-offsets-per-trigger records are waiting): the Kafka source paces the batches, so "
                    "they do not line up with window ends (docs/benchmarks.md)")
    add_option(parser, "--dead-letter-trigger-ms", type=positive_int, default=10_000,
               help="trigger interval of the dead-letter query: dead letters wait up to this long, and its "
                    "batches share the driver's cores with the main query's less often (docs/benchmarks.md); "
                    "its cap on records per batch is --max-offsets-per-trigger scaled to the same pace")
    add_option(parser, "--metrics-port", type=non_negative_int, default=0,
               help="port of the Prometheus endpoint, 0 for none")
    add_runtime_arguments(parser, java_options=java_options)  # --master, --spark-jars, --shuffle-partitions, ...


def metrics_spec(stream: str) -> StreamSpec:
    """How the metrics job's window results become entries: one card per metric, a window per entry."""
    return StreamSpec(stream=stream, key="metricName", mode="append", id_column="processingId",
                      event_time="windowEnd", window=("windowStart", "windowEnd"),
                      value_fields=("avg", "min", "max", "count"), title="Metrics")


def window_record(row: dict[str, Any], stream: str = "metrics") -> Record:
    """The record the metrics job commits for one window row (``pipeline.WINDOW_SCHEMA``); for tests and
    benchmarks that write the log without Spark."""
    from sparkwire.aggregator.pipeline import WINDOW_SCHEMA

    return ResultEncoder(metrics_spec(stream), WINDOW_SCHEMA).encode([row], revision=0).records[0]


def paced(args: argparse.Namespace) -> dict[str, str]:
    """Kafka source options that start a batch once ``--trigger-ms`` has passed since the last one (or once
    ``--max-offsets-per-trigger`` records wait), under a 0 ms trigger: a batch's start then follows the
    previous batch, not the clock's whole seconds, which window ends (and the events closing them) fall on."""
    cap = int(args.max_offsets_per_trigger)
    return {"minOffsetsPerTrigger": str(cap or _NEVER_ENOUGH), "maxTriggerDelay": f"{args.trigger_ms}ms"}


def spark_delay_ms(args: argparse.Namespace) -> int:
    """The delay of Spark's own (global) watermark, the dedup's: the windows' delay plus the skew between
    partitions that Spark keeps rows through, so that the sink's per-partition rule decides what is late
    (``windows.py``)."""
    skew = int(args.partition_skew_ms) or 2 * int(args.watermark_delay_ms)
    return int(args.watermark_delay_ms) + skew


def _closed_upto(window_ms: int, delay_ms: int, checkpoint: str) -> dict[int, int]:
    return WindowStateFiles(checkpoint, window_ms, delay_ms).closed_upto()


def metrics_job(args: argparse.Namespace) -> Job:
    """The metrics stream as a :class:`~sparkwire.spark.Job`. ``query`` is the whole windowed aggregation
    (``pipeline.window_results``), which the rebuild runs over past input; the live stream runs only its
    stateful part, the dedup, and its sink closes the windows (:func:`start_metrics`)."""
    from sparkwire.aggregator import pipeline

    source = KafkaSource(args.bootstrap_servers, args.topic, starting_offsets=args.starting_offsets,
                         max_offsets_per_trigger=args.max_offsets_per_trigger, options=paced(args))
    # Without a dead-letter query, the main query counts the malformed records it skips.
    events = functools.partial(pipeline.events, count_malformed=not args.dead_letter_topic)
    query = SourceQuery(source=source, events=events, event_time=pipeline.EVENT_TIME,
                        watermark_delay_ms=spark_delay_ms(args),
                        query=functools.partial(pipeline.window_results, window_ms=args.window_ms))
    spec = metrics_spec(args.stream)
    target = Target(redis_url=args.redis_url, checkpoint=f"{args.checkpoint.rstrip('/')}/aggregate",
                    trigger_ms=args.trigger_ms, retention=args.retention, chunk_size=args.chunk_size,
                    query_name=AGGREGATE_QUERY, replicas=args.redis_replicas)
    return Job(query, spec, target, functools.partial(_closed_upto, args.window_ms, args.watermark_delay_ms),
               window_ms=args.window_ms)


def start_metrics(spark: Any, args: argparse.Namespace, faults: FaultInjector | None = None) -> Any:
    """Start the metrics stream: Kafka -> events -> watermark -> dedup (Spark's one state) -> the sink, which
    aggregates each batch and closes windows (``closing_sink.py``)."""
    from sparkwire.aggregator import pipeline
    from sparkwire.aggregator.closing_sink import WindowClosingSink

    job = metrics_job(args)
    query, spec, target = job.query, job.spec, job.target
    # One stateful operator filters late rows with the batch's own watermark (delay + partition skew, so it
    # keeps a lagging partition's rows: the sink decides what is late, windows.py). Batches without new input
    # would only move the dedup's eviction: the next batch with input does that.
    spark.conf.set("spark.sql.streaming.statefulOperator.allowMultiple", "false")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    # How often the paced source is asked whether a batch is due (Spark's default, 10 ms, asks Kafka for its
    # latest offsets 100 times a second).
    spark.conf.set("spark.sql.streaming.pollingDelay", f"{_POLLING_MS}ms")
    events = query.events(query.source.read_stream(spark))
    frame = pipeline.deduplicated(events.withWatermark(query.event_time, f"{query.watermark_delay_ms} milliseconds"))
    encoder = ResultEncoder(spec, pipeline.WINDOW_SCHEMA)
    assert job.closed_upto is not None
    rebuilder = HistoryRebuilder(query, encoder, target.checkpoint,
                                 functools.partial(job.closed_upto, target.checkpoint), job.window_ms)
    descriptor = json.dumps(spec.descriptor(pipeline.WINDOW_SCHEMA, AVAILABLE), separators=(",", ":"))
    states = WindowStateFiles(target.checkpoint, args.window_ms, args.watermark_delay_ms)
    sink = WindowClosingSink(target.writer(spec.stream), encoder, faults or FaultInjector.from_env(), rebuilder,
                             descriptor, states=states, idle_ms=args.partition_idle_ms or None)
    return start(frame, sink, spec, target, trigger_ms=0)


def dead_letter_cap(args: argparse.Namespace) -> int:
    """The dead-letter query's cap on records per batch: the main query's, scaled by how many of its
    triggers one dead-letter trigger spans, so both read at the same pace (0: no cap)."""
    cap, spans = int(args.max_offsets_per_trigger), math.ceil(int(args.dead_letter_trigger_ms) / int(args.trigger_ms))
    return cap * max(1, spans)


def start_dead_letters(spark: Any, args: argparse.Namespace) -> Any:
    """The records that are not events, as they came, to the dead-letter topic (a query of its own)."""
    from pyspark.sql import functions as F

    from sparkwire.aggregator import pipeline
    from sparkwire.spark import DEADLETTER_OBSERVATION, DEADLETTER_QUERY, replan_unrunnable_batch

    raw = KafkaSource(args.bootstrap_servers, args.topic, starting_offsets=args.starting_offsets,
                      max_offsets_per_trigger=dead_letter_cap(args)).read_stream(spark)
    dead_letters = pipeline.dead_letters(pipeline.parse(raw)).observe(
        DEADLETTER_OBSERVATION, F.count(F.lit(1)).alias("malformed")
    )
    checkpoint = f"{args.checkpoint.rstrip('/')}/deadletter"
    replan_unrunnable_batch(checkpoint, DEADLETTER_QUERY)
    return (
        dead_letters.writeStream.queryName(DEADLETTER_QUERY)
        .format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("topic", args.dead_letter_topic)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.dead_letter_trigger_ms} milliseconds")
        .start()
    )


def run(args: argparse.Namespace) -> int:
    from sparkwire.spark import ProgressReporter

    logs.configure(args.log_level)
    if args.metrics_port:
        from prometheus_client import start_http_server

        from sparkwire.build_info import publish

        publish("spark-job")
        start_http_server(args.metrics_port)
    stop = stop_on_signals()
    spark = session(args, "sparkwire-aggregator")
    spark.streams.addListener(ProgressReporter())
    queries = [start_metrics(spark, args)]
    if args.dead_letter_topic:
        queries.append(start_dead_letters(spark, args))
    return serve(spark, queries, stop)


def add_rebuild_arguments(parser: argparse.ArgumentParser) -> None:
    add_arguments(parser, java_options="")  # a rebuild is one big batch job: the full JIT (docs/benchmarks.md)
    add_option(parser, "--upto-batch", type=non_negative_int, default=0,
               help="rebuild the results of the batches below this one; 0: every batch the checkpoint's "
                    "commit log holds")
    add_option(parser, "--job", default="",
               help="a user's job instead of the metrics job: MODULE:NAME, NAME a sparkwire.spark.Job or a function "
                    "returning one (e.g. sparkwire.examples.orders.job:job_from_environment); its own settings "
                    "are used, the metrics options above are not")


def run_rebuild(args: argparse.Namespace) -> int:
    """``sparkwire rebuild``: exit 0 when the whole history was rebuilt, 3 when part of it is past retention,
    2 when the job cannot be rebuilt."""
    logs.configure(args.log_level)
    job = load_job(args.job) if args.job else metrics_job(args)
    spark = session(args, "sparkwire-rebuild")
    try:
        return rebuild_job(job, spark, args.upto_batch or None)
    finally:
        spark.stop()
