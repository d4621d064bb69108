"""Spark throughput: the real aggregator on this machine, its sustained input rate and
the latency from a window's close to a client rendering its result.

Starts its own Kafka broker and ``redis-server`` (AOF, ``appendfsync always``) in a temporary directory.

1. **Sustained rate.** One backlog of metric events (the producer's own generator and format, event ids
   for dedup) is produced once. For each rate R, a fresh ``sparkwire aggregate`` (the job as deployed:
   parse, dead-letter query, watermark, dedup, windows, ``foreachBatch`` commit into Redis) reads it with
   ``maxOffsetsPerTrigger = R x trigger``; its progress log gives each micro-batch's rows and duration.
   R is sustained when every measured batch read its whole quota and the batches end within the
   trigger interval (p95, and the slowest within 1.25x). Variants (shuffle partitions, trigger, the job
   without its dead-letter query) run the same way.
2. **Correct at that rate.** The highest sustained rate reads the whole backlog; its replay log must equal
   the oracle's results (``sparkwire_harness.verify``), computed independently from the produced records.
3. **Window close -> render.** A producer sends events at wall-clock time (heartbeats on), the job runs
   with its default window, delay and trigger, a gateway serves the stream and a ``StreamClient``
   receives it; per result: commit time minus window end, and receive time minus commit time.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/spark_throughput.py     # make bench-spark
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import redis
from _common import emit_section, machine_info, process_cpu_seconds
from _spark_rates import (
    DRIVER_MEMORY,
    Batch,
    RateVerdict,
    Rendered,
    RunSpec,
    aggregate_batches,
    highest_sustained,
    judge,
)

from sparkwire.client.background import BackgroundClient
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.stack import GatewayProcess, KafkaBroker, ManagedProcess, RedisServer
from sparkwire_harness.verify import Produced, compare, expected_results, oracle_input, read_produced

SECTION = "spark_throughput"
PYTHON = [sys.executable, "-m", "sparkwire.cli"]
WINDOW_MS, DELAY_MS = 10_000, 5_000  # the job's defaults
BACKLOG_SPAN_S, BACKLOG_METRICS = 90, 50
# 1 s triggers at rising rates, then longer triggers (a micro-batch costs ~1 s here whatever its size).
# The same at 100,000/s with one query instead of two: what the dead-letter query's second read costs.
DEFAULT_RUNS = ("10000@1000,20000@1000,50000@5000,50000@5000/2/tiered,50000@5000/4/tiered,100000@10000/2/tiered,"
                "100000@10000/2/single/tiered")
REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=lambda t: [RunSpec.parse(x) for x in t.split(",")],
                        default=[RunSpec.parse(x) for x in DEFAULT_RUNS.split(",")],
                        help="rate@trigger_ms[/shuffle_partitions], comma-separated")
    parser.add_argument("--long-batches", type=int, default=3, help="measured batches with triggers over 2 s")
    parser.add_argument("--batches", type=int, default=6, help="measured micro-batches per rate")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured micro-batches first")
    parser.add_argument("--live-rate", type=int, default=5_000, help="events/s of the latency run")
    parser.add_argument("--live-seconds", type=int, default=45, help="length of the latency run")
    parser.add_argument("--quick", action="store_true", help="smoke run: small rates, few batches")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md", help="'-' for stdout only")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = [RunSpec.parse(x) for x in ("5000@1000", "20000@3000")]
        args.batches, args.long_batches, args.warmup = 3, 2, 1
        args.live_rate, args.live_seconds = 500, 25
    return args


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args, self.workdir = args, workdir
        self.redis = RedisServer(workdir / "redis")
        self.kafka = KafkaBroker(workdir / "kafka", quick_jit=False)
        self.runs = 0

    def aggregator(self, stream: str, topic: str, *options: str, dead_letters: bool = True) -> ManagedProcess:
        self.runs += 1
        command = [*PYTHON, "aggregate", "--bootstrap-servers", self.kafka.bootstrap, "--topic", topic,
                   "--dead-letter-topic", f"{topic}-dlq" if dead_letters else "",
                   "--redis-url", self.redis.url, "--stream", stream,
                   "--checkpoint", str(self.workdir / f"checkpoint-{self.runs}"),
                   "--driver-memory", DRIVER_MEMORY, *options]
        process = ManagedProcess(f"aggregate-{self.runs}", command, self.workdir)
        process.start()
        return process

    def produce(self, topic: str, count: int, rate: int, *flags: str) -> ManagedProcess:
        events = self.workdir / f"{topic}.jsonl"
        command = [*PYTHON, "produce", "--bootstrap-servers", self.kafka.bootstrap, "--topic", topic,
                   "--count", str(count), "--rate", str(rate), "--events-file", str(events),
                   "--log-level", "WARNING", *flags]
        process = ManagedProcess(f"produce-{topic}", command, self.workdir)
        process.start()
        return process

    def batches_of(self, process: ManagedProcess) -> list[Batch]:
        return aggregate_batches(process.log_path.read_text(errors="replace").splitlines())

    def batches_for(self, spec: RunSpec) -> int:
        return int(self.args.batches if spec.trigger_ms <= 2000 else self.args.long_batches)

    def run_rate(self, topic: str, spec: RunSpec) -> RateVerdict:
        """One aggregator reading the backlog at ``spec.rate`` until enough batches are measured."""
        args = self.args
        rate, trigger_ms, batches = spec.rate, spec.trigger_ms, self.batches_for(spec)
        stream = (f"rate-{rate}-{spec.shuffle}-{trigger_ms}{'' if spec.dead_letters else '-single'}"
                  f"{'-tiered' if spec.tiered else ''}")
        process = self.aggregator(stream, topic, *spec.options, dead_letters=spec.dead_letters)
        deadline = time.monotonic() + 60 + 3 * (args.warmup + batches) * trigger_ms / 1000
        try:
            while time.monotonic() < deadline:
                done = [b for b in self.batches_of(process) if b.rows > 0]
                if len(done) >= args.warmup + batches:
                    break
                if not process.alive:
                    raise RuntimeError(f"aggregator exited:\n{process.log_tail(40)}")
                time.sleep(1)
        finally:
            process.stop(timeout=30)
        verdict = judge(rate, self.batches_of(process), trigger_ms, args.warmup, spec.label)
        verdict = RateVerdict(rate, verdict.measured[:batches], trigger_ms, verdict.per_batch, spec.label)
        print(f"[rate] {rate:,}/s {spec.label}: rows {[b.rows for b in verdict.measured]}, batches p50/p95/max "
              f"{verdict.duration_ms(0.5):.0f}/{verdict.duration_ms(0.95):.0f}/{verdict.duration_ms(1):.0f} ms, "
              f"capacity {verdict.capacity:,.0f}/s, sustained {verdict.sustained}", file=sys.stderr, flush=True)
        return verdict

    def check_exactly_once(self, topic: str, spec: RunSpec, produced: list[Produced]) -> tuple[bool, str, float]:
        """The whole backlog as ``spec`` reads it; the log must equal the oracle. Returns (ok, summary,
        seconds)."""
        stream = f"full-{spec.rate}"
        started = time.monotonic()
        process = self.aggregator(stream, topic, *spec.options, dead_letters=spec.dead_letters)
        expected = expected_results(produced, WINDOW_MS, DELAY_MS)
        reader = ReplayLogReader(redis.Redis.from_url(self.redis.url), stream)
        try:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and reader.meta().last_seq < len(expected):
                if not process.alive:
                    raise RuntimeError(f"aggregator exited:\n{process.log_tail(40)}")
                time.sleep(1)
            took = time.monotonic() - started
            time.sleep(3 * spec.trigger_ms / 1000)  # nothing more may come
        finally:
            process.stop(timeout=30)
        report = compare(expected, reader.read_after(0, 10 * len(expected) + 10))
        return report.ok, report.summary(), took

    def latency(self) -> tuple[list[Rendered], float]:
        """Events at wall-clock time through the job, a gateway and a client."""
        args = self.args
        topic, stream = "live", "live"
        self.kafka.create_topic(topic, partitions=2)
        self.kafka.create_topic(f"{topic}-dlq", partitions=1)
        gateway = GatewayProcess(self.workdir, self.redis.url, [stream]).start()
        rendered: list[Rendered] = []

        def on_entry(entry: ReceivedEntry) -> None:
            data = entry.data if isinstance(entry.data, dict) else {}
            rendered.append(Rendered(int(data.get("windowEnd", 0)), entry.commit_ms, int(time.time() * 1000)))

        client = BackgroundClient(gateway.ws(stream), on_entry=on_entry).start()
        job = self.aggregator(stream, topic)  # the job's default window, delay and trigger
        try:
            time.sleep(20)  # the driver and its JVM start
            # No --start-ms: the producer stamps event time from its own clock when it starts sending; one
            # taken here would run ahead of its sends by the producer's start (~0.4 s), added to every span.
            producer = self.produce(topic, args.live_rate * args.live_seconds, args.live_rate, "--realtime",
                                    "--heartbeat-ms", "1000",
                                    "--idle-ms", str(WINDOW_MS + DELAY_MS + 5000))
            producer_cpu = float("nan")
            while producer.alive:  # CPU sampled while it lives: /proc forgets a process once it exits
                producer_cpu = process_cpu_seconds_or_nan(producer)
                time.sleep(1)
            if producer.returncode != 0:
                raise RuntimeError(f"producer failed:\n{producer.log_tail(20)}")
            time.sleep(3)
        finally:
            client.stop()
            job.stop(timeout=30)
            gateway.stop()
        return rendered, producer_cpu


def process_cpu_seconds_or_nan(process: ManagedProcess) -> float:
    try:
        return process_cpu_seconds(process.pid) if process.pid else float("nan")
    except OSError:
        return float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    load_before = os.getloadavg()
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp:
        bench = Bench(args, Path(tmp))
        bench.redis.start()
        bench.kafka.start()
        try:
            topic = "backlog"
            bench.kafka.create_topic(topic, partitions=2)
            bench.kafka.create_topic(f"{topic}-dlq", partitions=1)
            count = max(spec.per_batch * (args.warmup + bench.batches_for(spec) + 2) for spec in args.runs)
            t0 = time.monotonic()
            # Event time spread over BACKLOG_SPAN_S, 50 metrics: a replayed backlog closes windows as it goes.
            producer = bench.produce(topic, count, max(count // BACKLOG_SPAN_S, 1), "--metrics", str(BACKLOG_METRICS),
                                     "--start-ms", str(int(time.time() * 1000) - 3_600_000))
            while producer.alive:
                time.sleep(1)
            if producer.returncode != 0:
                raise RuntimeError(f"producer failed:\n{producer.log_tail(20)}")
            produce_s = time.monotonic() - t0
            print(f"[backlog] {count:,} events in {produce_s:.0f} s", file=sys.stderr, flush=True)
            produced = oracle_input(read_produced(bench.workdir / f"{topic}.jsonl"))
            verdicts = [bench.run_rate(topic, spec) for spec in args.runs]
            best = highest_sustained(verdicts)
            check = next(spec for spec, v in zip(args.runs, verdicts, strict=True) if v is best) if best else min(
                args.runs, key=lambda spec: spec.rate)
            check_rate = check.rate
            ok, summary, took = bench.check_exactly_once(topic, check, produced)
            print(f"[exactly once] {check_rate:,}/s: {summary}", file=sys.stderr, flush=True)
            rendered, producer_cpu = bench.latency()
            info = machine_info(redis.Redis.from_url(bench.redis.url))
        finally:
            bench.kafka.stop()
            bench.redis.stop()
    from _spark_report import render  # the report's wording, apart from the measuring

    text = render(args=args, date=date, wall=time.monotonic() - started, info=info,
                  command=shlex.join([".venv/bin/python", "bench/spark_throughput.py", *argv]),
                  load=(load_before, os.getloadavg()), count=count, produce_s=produce_s, verdicts=verdicts,
                  best=best, check=(check, ok, summary, took), rendered=rendered,
                  producer_cpu=producer_cpu)
    emit_section(args.output, SECTION, text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
