"""``sparkwire aggregate``: the Spark Structured Streaming job, Kafka -> windows -> replay log.

Exits non-zero whenever a query stops on its own (a streaming job never finishes), so a supervisor
(the Spark operator's restart policy, or a test) restarts it on the same checkpoint.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import redis

from sparkwire import logs
from sparkwire.aggregator.faults import FaultInjector
from sparkwire.aggregator.rebuild import HistoryRebuilder
from sparkwire.aggregator.sink import ReplayLogSink
from sparkwire.options import add_option, non_negative_int, positive_int
from sparkwire.paths import cache_dir
from sparkwire.replaylog import ReplayLogWriter

log = logging.getLogger(__name__)


class QueryFailed(RuntimeError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "--bootstrap-servers", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    add_option(parser, "--topic", default="metrics-raw", help="Kafka topic of raw metric events")
    add_option(parser, "--dead-letter-topic", default="metrics-deadletter",
               help="Kafka topic that receives records that are not valid events")
    add_option(parser, "--starting-offsets", default="earliest",
               help="where a new checkpoint starts reading (later runs resume from the checkpoint)")
    add_option(parser, "--max-offsets-per-trigger", type=non_negative_int, default=0,
               help="cap on Kafka records per micro-batch, 0 for none")
    add_option(parser, "--redis-url", default="redis://127.0.0.1:6379/0", help="Redis holding the replay log")
    add_option(parser, "--stream", default="metrics", help="replay-log stream name")
    add_option(parser, "--retention", type=positive_int, default=100_000, help="entries kept in the replay log")
    add_option(parser, "--chunk-size", type=positive_int, default=500,
               help="records per commit-script call (bounds how long one call blocks Redis)")
    add_option(parser, "--checkpoint", default=".run/checkpoints/aggregator",
               help="Spark checkpoint directory (offsets, state, commit log)")
    add_option(parser, "--window-ms", type=positive_int, default=10_000, help="tumbling window length")
    add_option(parser, "--watermark-delay-ms", type=non_negative_int, default=5_000,
               help="how late an event may arrive before its window is closed")
    add_option(parser, "--trigger-ms", type=positive_int, default=1_000, help="micro-batch trigger interval")
    add_option(parser, "--shuffle-partitions", type=positive_int, default=2,
               help="spark.sql.shuffle.partitions (Spark's 200 is slow for small state)")
    add_option(parser, "--master", default="local[2]",
               help="Spark master; empty to leave it to spark-submit (as under the Spark operator)")
    add_option(parser, "--spark-jars", default="",
               help="directory of the Kafka connector jars; empty: .cache/spark-jars when present")
    add_option(parser, "--metrics-port", type=non_negative_int, default=0,
               help="port of the Prometheus endpoint, 0 for none")
    add_option(parser, "--log-level", default="INFO", help="log level")


def _connector_jars(directory: str) -> list[str]:
    if directory:
        jars = sorted(str(p) for p in Path(directory).glob("*.jar"))
        if not jars:
            raise SystemExit(f"no jars in --spark-jars directory {directory!r}; run `make setup`")
        return jars
    default = cache_dir() / "spark-jars"  # a source checkout's; images have the jars on the classpath
    return sorted(str(p) for p in default.glob("*.jar"))  # empty: jars are on Spark's classpath


def spark_session(args: argparse.Namespace, app_name: str = "sparkwire-aggregator") -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if args.master:
        builder = builder.master(args.master)
    jars = _connector_jars(args.spark_jars)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = (
        builder.config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def start_queries(spark: Any, args: argparse.Namespace, sink: ReplayLogSink) -> list[Any]:
    # pyspark is imported only here and in run(): `sparkwire gateway` and `produce` share this CLI and
    # their image has no Spark.
    from pyspark.sql import functions as F

    from sparkwire.aggregator import pipeline
    from sparkwire.aggregator.progress import AGGREGATE_QUERY, DEADLETTER_OBSERVATION, DEADLETTER_QUERY

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    parsed = pipeline.parse(reader.load())
    checkpoint = args.checkpoint.rstrip("/")
    trigger = f"{args.trigger_ms} milliseconds"

    results = pipeline.window_results(parsed, args.window_ms, args.watermark_delay_ms)
    aggregate = (
        results.writeStream.queryName(AGGREGATE_QUERY)
        .outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", f"{checkpoint}/aggregate")
        .trigger(processingTime=trigger)
        .start()
    )
    sink.bind_query(str(aggregate.id))

    dead_letters = pipeline.dead_letters(parsed).observe(
        DEADLETTER_OBSERVATION, F.count(F.lit(1)).alias("malformed")
    )
    deadletter = (
        dead_letters.writeStream.queryName(DEADLETTER_QUERY)
        .format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("topic", args.dead_letter_topic)
        .option("checkpointLocation", f"{checkpoint}/deadletter")
        .trigger(processingTime=trigger)
        .start()
    )
    return [aggregate, deadletter]


def supervise(queries: list[Any], stop: threading.Event) -> None:
    """Return when asked to stop; raise as soon as any query has stopped by itself."""
    while not stop.wait(1.0):
        for query in queries:
            if not query.isActive:
                raise QueryFailed(f"query {query.name} stopped: {query.exception()}")


def run(args: argparse.Namespace) -> int:
    from sparkwire.aggregator.progress import ProgressReporter

    logs.configure(args.log_level)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping on signal", extra={"fields": {"signal": signum}})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    writer = ReplayLogWriter(
        redis.Redis.from_url(args.redis_url), args.stream, retention=args.retention, chunk_size=args.chunk_size
    )
    spark = spark_session(args)
    spark.streams.addListener(ProgressReporter())
    rebuilder = HistoryRebuilder(args.bootstrap_servers, args.topic, args.checkpoint.rstrip("/"), args.window_ms,
                                 args.watermark_delay_ms)
    queries = start_queries(spark, args, ReplayLogSink(writer, FaultInjector.from_env(), rebuilder))
    try:
        supervise(queries, stop)
    except QueryFailed:
        if stop.is_set():  # the JVM got the same signal and stopped the queries first
            return 0
        log.exception("streaming query failed")
        return 1
    finally:
        _shut_down(queries, spark)
    return 0


def _shut_down(queries: list[Any], spark: Any) -> None:
    """Stop what is still running; the JVM may already be gone when the signal reached it too."""
    from py4j.protocol import Py4JError

    try:
        for query in queries:
            query.stop()
        spark.stop()
    except (Py4JError, ConnectionError) as exc:
        log.info("spark already stopped", extra={"fields": {"reason": str(exc)}})
