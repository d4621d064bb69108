"""Running a delivery as a process: ``main(job)`` gives a user's job file the commands ``run`` and ``rebuild``
(``python my_job.py run``), and :func:`serve` keeps started queries running until a signal.

A streaming job never finishes: ``run`` exits non-zero whenever a query stops by itself, so a supervisor
(the Spark operator's restart policy, or a test) restarts it on the same checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from sparkwire import logs
from sparkwire.options import add_option, jvm_memory, non_negative_int, positive_int
from sparkwire.spark.delivery.deliver import Job, deliver_job, window_unnamed
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.runtime.session import QUICK_JIT, spark_session

log = logging.getLogger(__name__)


class QueryFailed(RuntimeError):
    pass


def add_runtime_arguments(parser: argparse.ArgumentParser, log_level: str = "INFO",
                          java_options: str = QUICK_JIT) -> None:
    """``java_options``: the default of ``--driver-java-options`` (a rebuild, one big batch job, wants the full
    JIT)."""
    add_option(parser, "--master", default="local[2]",
               help="Spark master; empty to leave it to spark-submit (as under the Spark operator)")
    add_option(parser, "--spark-jars", default="",
               help="directory of the Kafka connector jars; empty: .cache/spark-jars when present")
    add_option(parser, "--shuffle-partitions", type=positive_int, default=2,
               help="spark.sql.shuffle.partitions (Spark's 200 is slow for small state)")
    add_option(parser, "--driver-memory", type=jvm_memory, default="",
               help="the driver JVM's heap when this process starts it (--master set), e.g. 4g; empty: Spark's "
                    "1g, which a local driver can outgrow with very large micro-batches (OutOfMemoryError). "
                    "Under spark-submit the submission sets it")
    add_option(parser, "--class-archive", default="",
               help="a class-data-sharing archive for a driver this process starts (--master set), which starts "
                    "it sooner (docs/benchmarks.md, \"Driver recovery\"): empty, the checkout's "
                    ".cache/spark-cds/driver.jsa when present (make setup writes it); 'off', none")
    add_option(parser, "--driver-java-options", default=java_options,
               help="more JVM options for a driver this process starts (--master set), e.g. "
                    f"--driver-java-options={QUICK_JIT}: the JIT's first tier (C1) only, which on 1-2 cores brings a "
                    "restarted streaming driver back sooner and shortens small batches, and runs big ones slower "
                    "(docs/benchmarks.md, \"Driver JIT\"); empty: the JVM's own. Under spark-submit the submission "
                    "sets them (the chart's aggregator.driver.javaOptions)")
    add_option(parser, "--log-level", default=log_level, help="log level")


def session(args: argparse.Namespace, app_name: str) -> Any:
    started = time.perf_counter()
    spark = spark_session(app_name, master=args.master, jars_dir=args.spark_jars,
                          shuffle_partitions=args.shuffle_partitions, driver_memory=args.driver_memory,
                          class_archive=args.class_archive, java_options=args.driver_java_options)
    # What a driver's restart costs before any query starts: the JVM and the SparkContext.
    log.info("spark session started", extra={"fields": {
        "event": "session_started", "app": app_name, "sessionMs": round((time.perf_counter() - started) * 1000)}})
    return spark


def supervise(queries: Sequence[Any], stop: threading.Event) -> None:
    """Return when asked to stop; raise as soon as any query has stopped by itself."""
    while not stop.wait(1.0):
        for query in queries:
            if not query.isActive:
                raise QueryFailed(f"query {query.name} stopped: {query.exception()}")


def serve(spark: Any, queries: Sequence[Any], stop: threading.Event) -> int:
    """Keep ``queries`` running until ``stop`` is set (0) or one of them fails (1); then stop them all."""
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


def stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping on signal", extra={"fields": {"signal": signum}})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def _shut_down(queries: Sequence[Any], spark: Any) -> None:
    """Stop what is still running; the JVM may already be gone when the signal reached it too."""
    from py4j.protocol import Py4JError

    try:
        for query in queries:
            query.stop()
        spark.stop()
    except (Py4JError, ConnectionError) as exc:
        log.info("spark already stopped", extra={"fields": {"reason": str(exc)}})


def load_job(reference: str) -> Job:
    """``MODULE:NAME``: the module's ``NAME``, a :class:`Job` or a function of no arguments returning one."""
    module_name, _, name = reference.partition(":")
    if not module_name or not name:
        raise SystemExit(f"--job {reference!r}: expected MODULE:NAME, "
                         "e.g. sparkwire.examples.orders.job:job_from_environment")
    found = getattr(importlib.import_module(module_name), name, None)
    job = found() if callable(found) and not isinstance(found, Job) else found
    if not isinstance(job, Job):
        raise SystemExit(f"--job {reference!r}: {name} is not a sparkwire.spark.Job nor a function returning one")
    return job


def rebuild(job: Job, spark: Any, upto: int | None, command: str = "sparkwire rebuild") -> int:
    """Rebuild ``job``'s stream from Kafka and print the report. Exit 0 when the whole history was rebuilt,
    3 when part of it is past retention, 2 when the job cannot be rebuilt."""
    from sparkwire.spark.rebuild.rebuilder import HistoryRebuilder

    schema = job.query.stream(spark).schema
    reason = job.query.rebuild_unavailable(spark) or window_unnamed(job.spec, schema)
    if reason is not None:
        print(f"{command}: ERROR stream {job.spec.stream} cannot be rebuilt: {reason}", file=sys.stderr)
        return 2
    target = job.target
    writer = target.writer(job.spec.stream)
    encoder = ResultEncoder(job.spec, schema)
    closed_upto = functools.partial(job.closed_upto, target.checkpoint) if job.closed_upto else None
    report = HistoryRebuilder(job.query, encoder, target.checkpoint, closed_upto, job.window_ms)(spark, writer, upto)
    for line in report.lines():
        print(f"{command}: {line}", file=sys.stdout if not line.startswith("ERROR") else sys.stderr)
    return 0 if report.plan.complete else 3


def add_placement_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the job runs, overriding what its file says: what the Helm chart sets for every job."""
    add_option(parser, "--bootstrap-servers", default="", help="Kafka bootstrap servers; empty: the job's")
    add_option(parser, "--redis-url", default="", help="Redis holding the replay log (redis:// or "
               "redis+sentinel://host:port,host:port/<master>); empty: the job's")
    add_option(parser, "--redis-replicas", type=int, default=-1,
               help="replicas that must hold each batch before it is published (Redis WAIT); -1: the job's")
    add_option(parser, "--stream", default="", help="replay-log stream; empty: the job's")
    add_option(parser, "--checkpoint", default="", help="Spark checkpoint directory; empty: the job's")


def placed(job: Job, args: argparse.Namespace) -> Job:
    """``job`` with the placement options given (non-empty) in place of its own settings."""
    source = job.query.source
    if args.bootstrap_servers:
        source = dataclasses.replace(source, bootstrap_servers=args.bootstrap_servers)
    target = job.target
    if args.redis_url:
        target = dataclasses.replace(target, redis_url=args.redis_url)
    if args.redis_replicas >= 0:
        target = dataclasses.replace(target, replicas=args.redis_replicas)
    if args.checkpoint:
        target = dataclasses.replace(target, checkpoint=args.checkpoint)
    spec = dataclasses.replace(job.spec, stream=args.stream) if args.stream else job.spec
    # replace(): the job's other settings (a closing sink's closed_upto and window_ms) stay.
    return dataclasses.replace(job, query=dataclasses.replace(job.query, source=source), spec=spec, target=target)


def main(job: Job, argv: Sequence[str] | None = None) -> int:
    """The command line of a job file: ``run`` (deliver until stopped) or ``rebuild`` (a lost log, the job
    stopped). ``--bootstrap-servers``, ``--redis-url``, ``--redis-replicas``, ``--stream`` and ``--checkpoint``
    (or their ``SPARKWIRE_*`` variables, which the Helm chart sets) override the job's own. Returns the exit status."""
    parser = argparse.ArgumentParser(description=f"deliver stream {job.spec.stream!r} exactly once")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the streaming query into the replay log")
    add_runtime_arguments(run_parser)
    add_placement_arguments(run_parser)
    add_option(run_parser, "--metrics-port", type=non_negative_int, default=0,
               help="port of the Prometheus endpoint, 0 for none")
    rebuild_parser = commands.add_parser("rebuild", help="recompute a lost replay log from Kafka and the checkpoint")
    add_runtime_arguments(rebuild_parser, log_level="WARNING", java_options="")  # one big batch job: C2
    add_placement_arguments(rebuild_parser)
    add_option(rebuild_parser, "--upto-batch", type=non_negative_int, default=0,
               help="rebuild the results of the batches below this one; 0: every batch the commit log holds")
    args = parser.parse_args(argv)
    job = placed(job, args)
    logs.configure(args.log_level)
    if args.command == "rebuild":
        spark = session(args, f"sparkwire-rebuild-{job.spec.stream}")
        try:
            return rebuild(job, spark, args.upto_batch or None, command=f"rebuild {job.spec.stream}")
        finally:
            spark.stop()
    if args.metrics_port:
        from prometheus_client import start_http_server

        from sparkwire.build_info import publish

        publish("spark-job")
        start_http_server(args.metrics_port)
    from sparkwire.spark.runtime.progress import ProgressReporter

    stop = stop_on_signals()
    spark = session(args, f"sparkwire-{job.spec.stream}")
    spark.streams.addListener(ProgressReporter())
    return serve(spark, [deliver_job(job, spark)], stop)
