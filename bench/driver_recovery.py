"""Driver recovery: how long after a SIGKILL of the Spark driver results flow again, and
where that time goes.

Starts its own Kafka broker and ``redis-server`` (AOF, ``appendfsync always``) in a temporary directory, a
producer sending events at wall-clock time (heartbeats on), and ``sparkwire aggregate`` with its defaults
(window 10 s, watermark delay 5 s, trigger 1 s) on a fresh checkpoint. Once results flow, the driver's whole
process group (Python and its JVM) is SIGKILLed ``--kills`` times, at moments spread over the window cycle,
and started again at once on the same checkpoint, as the operator's restart policy does minus the
operator (the kind suite covers the operator). Per kill, from the new driver's log: Python, the JVM and
the SparkContext; the query's start (plan, checkpoint); the first batch (the one in flight at the kill,
run again, committed); and from the replay log the first result appended after the kill, against when
the windows closed before any kill (close -> commit, p50). The replay log must equal the oracle's results
over everything produced.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/driver_recovery.py      # make bench-recovery
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import redis
from _common import emit_section, machine_info, markers, quantile, reproduce_lines
from _recovery_phases import Recovery, recovery_from_log

from sparkwire.replaylog import Entry, ReplayLogReader
from sparkwire_harness.stack import KafkaBroker, ManagedProcess, RedisServer
from sparkwire_harness.verify import compare, expected_results, oracle_input, read_produced

SECTION = "driver_recovery"
PYTHON = [sys.executable, "-m", "sparkwire.cli"]
QUERY = "sparkwire-aggregate"
WINDOW_MS, DELAY_MS = 10_000, 5_000  # the job's defaults
REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=8, help="driver kills")
    parser.add_argument("--rate", type=int, default=2_000, help="events/s produced at wall-clock time")
    parser.add_argument("--seed", type=int, default=7, help="when in the window cycle each kill lands")
    parser.add_argument("--no-dead-letters", action="store_true",
                        help="run the job without its dead-letter query (--dead-letter-topic '')")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md", help="'-' for stdout only")
    return parser.parse_args(argv)


def close_to_commit(entries: Sequence[Entry]) -> list[float]:
    """Seconds from each result's window end to its commit."""
    return [(e.commit_ms - int(json.loads(e.data)["windowEnd"])) / 1000 for e in entries]


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args, self.workdir = args, workdir
        self.redis = RedisServer(workdir / "redis")
        self.kafka = KafkaBroker(workdir / "kafka", quick_jit=False)
        self.stream = "recovery"
        self.reader = ReplayLogReader(redis.Redis.from_url(self.redis.url), self.stream)

    def wait_for_seq_after(self, seq: int, timeout: float) -> Entry:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            entries = self.reader.read_after(seq, 1)
            if entries:
                return entries[0]
            time.sleep(0.1)
        raise RuntimeError(f"no result after seq {seq} within {timeout:.0f} s")

    def run(self) -> tuple[list[Recovery], list[float], tuple[bool, str]]:
        args = self.args
        rng = random.Random(args.seed)
        topic = stream = self.stream
        self.kafka.create_topic(topic, partitions=2)
        self.kafka.create_topic(f"{topic}-dlq", partitions=1)
        seconds = 90 + args.kills * 60  # long enough for every kill; the producer stops the run's input
        events = self.workdir / "events.jsonl"
        producer = ManagedProcess("produce", [
            *PYTHON, "produce", "--bootstrap-servers", self.kafka.bootstrap, "--topic", topic,
            # No --start-ms: the producer stamps event time from its own clock when it starts sending (one
            # taken here runs ahead of its sends by the producer's start, ~0.4 s, added to every close -> commit).
            "--count", str(args.rate * seconds), "--rate", str(args.rate), "--realtime",
            "--heartbeat-ms", "1000", "--events-file", str(events),
            "--idle-ms", str(WINDOW_MS + DELAY_MS + 5000), "--log-level", "WARNING",
        ], self.workdir)  # fmt: skip
        driver = ManagedProcess("aggregate", [
            *PYTHON, "aggregate", "--bootstrap-servers", self.kafka.bootstrap, "--topic", topic,
            "--dead-letter-topic", "" if args.no_dead_letters else f"{topic}-dlq",
            "--redis-url", self.redis.url, "--stream", stream, "--checkpoint", str(self.workdir / "checkpoint"),
        ], self.workdir)  # fmt: skip
        recoveries: list[Recovery] = []
        producer.start()
        driver.start()
        try:
            self.wait_for_seq_after(0, 180)
            # The first start read a backlog; the steady close -> commit is that of the window cycles after.
            time.sleep(15)
            caught_up_ms = int(time.time() * 1000)
            time.sleep(25)
            steady = close_to_commit([e for e in self.reader.read_after(0, 10_000) if e.commit_ms >= caught_up_ms])
            for n in range(args.kills):
                time.sleep(rng.uniform(0, WINDOW_MS / 1000))  # anywhere in the window cycle
                before = self.reader.meta().last_seq
                offset = driver.log_path.stat().st_size
                killed = time.time()
                driver.kill()
                restarted = time.time()
                driver.start()
                result = self.wait_for_seq_after(before, 240)
                time.sleep(3)  # the first batch's progress line follows its commit
                with driver.log_path.open("rb") as log:
                    log.seek(offset)
                    lines = log.read().decode(errors="replace").splitlines()
                recovery = recovery_from_log(lines, killed=killed, restarted=restarted, query=QUERY,
                                             first_result=result.commit_ms / 1000)
                recoveries.append(recovery)
                print(f"[kill {n + 1}] back after {recovery.back:.1f} s, first result after "
                      f"{recovery.first_result_after:.1f} s; " + ", ".join(
                          f"{k} {v:.1f} s" for k, v in recovery.spans.items()), file=sys.stderr, flush=True)
                time.sleep(15)  # results flow again before the next kill
            while producer.alive:
                time.sleep(1)
            expected = expected_results(oracle_input(read_produced(events)), WINDOW_MS, DELAY_MS)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and self.reader.meta().last_seq < len(expected):
                time.sleep(1)
            time.sleep(3)
            report = compare(expected, list(self.reader.iter_all()))
            return recoveries, steady, (report.ok, report.summary())
        finally:
            driver.stop(timeout=30)
            producer.stop()


def render(args: argparse.Namespace, *, date: str, wall: float, info: dict[str, str], command: str,
           recoveries: Sequence[Recovery], steady: Sequence[float], check: tuple[bool, str]) -> str:
    def stats(values: Sequence[float]) -> str:
        ordered = sorted(values)
        return f"{quantile(ordered, 0.5):.1f} / {quantile(ordered, 0.99):.1f}"

    steady_p50 = quantile(sorted(steady), 0.5)
    spans = list(recoveries[0].spans) if recoveries else []
    rows = [f"| {name} | {stats([r.spans[name] for r in recoveries])} |" for name in spans]
    phases = sorted({k for r in recoveries for k in r.first_batch_phases} - {"triggerExecution"})
    ok, summary = check
    start, end = markers(SECTION)
    lines = [
        start,
        "## Driver recovery: a SIGKILLed Spark driver back on its checkpoint",
        "",
        "`sparkwire aggregate` with its defaults (window 10 s, delay 5 s, trigger 1 s"
        + (", no dead-letter query" if args.no_dead_letters else ", beside it its dead-letter query")
        + ") on a live stream of",
        f"{args.rate:,} events/s (event time = wall time), its whole process group SIGKILLed {len(recoveries)} times",
        "at moments spread over the window cycle and started again at once on the same checkpoint (the",
        "operator's part is not in these figures), generated by `bench/driver_recovery.py` (method in its",
        "docstring).",
        "",
        *reproduce_lines(date, wall, f"flock /tmp/sparkwire-heavy.lock {command}"),
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM; Redis {info['redis']}.",
        "  Spark `local[2]`: driver, executors, Kafka, Redis and the producer share the 2 CPUs.",
        "",
        "| span (seconds) | p50 / p99 (= max) |",
        "|---|---:|",
        *rows,
        f"| **kill → first batch committed** (live again) | **{stats([r.back for r in recoveries])}** |",
        f"| kill → first result appended | {stats([r.first_result_after for r in recoveries])} |",
        "",
        "Building the SparkSession (JVM and SparkContext, from the driver's own timing) is "
        f"{stats([r.session_ms / 1000 for r in recoveries])} s of the second row; the first batch "
        f"after a restart takes {stats([r.first_batch_ms / 1000 for r in recoveries])} s, its phases (p50 ms): "
        + ", ".join(f"{p} {quantile(sorted(r.first_batch_phases.get(p, 0.0) for r in recoveries), 0.5):,.0f}"
                    for p in phases) + ".",
        "",
        f"Without a kill a window's results are committed {steady_p50:.1f} s (p50) after its end: the",
        "first result after a kill can come no sooner than its window's close allows, so \"first result\"",
        "mixes the recovery with where in the window cycle the kill fell.",
        "",
        f"**Exactly once over the run**: the replay log compared with the oracle's results computed from the "
        f"produced records: {'OK' if ok else 'FAILED'} — {summary}.",
        "",
        end,
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="recovery-bench-") as tmp:
        bench = Bench(args, Path(tmp))
        bench.redis.start()
        bench.kafka.start()
        try:
            recoveries, steady, check = bench.run()
            info = machine_info(redis.Redis.from_url(bench.redis.url))
        finally:
            bench.kafka.stop()
            bench.redis.stop()
    text = render(args, date=date, wall=time.monotonic() - started, info=info,
                  command=shlex.join([".venv/bin/python", "bench/driver_recovery.py", *argv]),
                  recoveries=recoveries, steady=steady, check=check)
    emit_section(args.output, SECTION, text)
    return 0 if check[0] else 1


if __name__ == "__main__":
    sys.exit(main())
