"""``make demo``: the pipeline on this machine with real processes, and results landing in the replay log.

Starts Redis and a Kafka broker, the aggregator (Spark) and a producer of live events (with some
duplicates and malformed records), prints every result as it is committed, then checks the log
against results computed independently from the produced events.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import redis

from sparkwire.replaylog import ReplayLogReader
from sparkwire.stack import KafkaBroker, ManagedProcess, RedisServer
from sparkwire.stack.paths import cache_dir
from sparkwire.verify import compare, expected_results

WINDOW_MS = 2_000
DELAY_MS = 1_000
STREAM = "metrics"


def _say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def _show(reader: ReplayLogReader, after: int) -> int:
    for entry in reader.read_after(after):
        result = json.loads(entry.data)
        print(
            f"  seq {entry.seq:>4}  {result['metricName']:<9} window ending {result['windowEnd']}  "
            f"count {result['count']:>4}  avg {result['avg']:8.3f}  id {entry.processing_id[:10]}…",
            flush=True,
        )
        after = entry.seq
    return after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkwire.demo", description=__doc__)
    parser.add_argument("--seconds", type=int, default=40, help="seconds of live events to produce")
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    args = parser.parse_args(argv)

    workdir = cache_dir() / "run" / f"demo-{int(time.time())}"
    workdir.mkdir(parents=True)
    _say(f"work dir {workdir} (process logs are here)")
    with RedisServer(workdir / "redis") as redis_server, KafkaBroker(workdir / "kafka") as kafka:
        _say(f"redis {redis_server.url}, kafka {kafka.bootstrap}")
        kafka.create_topic("metrics-raw", partitions=2)
        kafka.create_topic("metrics-deadletter", partitions=1)
        python = [sys.executable, "-m", "sparkwire.cli"]
        aggregator = ManagedProcess("aggregator", [
            *python, "aggregate", "--bootstrap-servers", kafka.bootstrap, "--redis-url", redis_server.url,
            "--stream", STREAM, "--checkpoint", str(workdir / "checkpoint"), "--window-ms", str(WINDOW_MS),
            "--watermark-delay-ms", str(DELAY_MS), "--trigger-ms", "500",
        ], workdir)  # fmt: skip
        events_file = workdir / "events.jsonl"
        producer = ManagedProcess("producer", [
            *python, "produce", "--bootstrap-servers", kafka.bootstrap, "--realtime",
            "--duration", str(args.seconds), "--rate", str(args.rate), "--max-disorder-ms", "300",
            "--duplicate-ratio", "0.02", "--malformed-ratio", "0.01", "--events-file", str(events_file),
        ], workdir)  # fmt: skip
        _say("starting the Spark aggregator (takes ~10 s) and the producer")
        aggregator.start()
        producer.start()
        reader = ReplayLogReader(redis.Redis.from_url(redis_server.url), STREAM)
        shown = 0
        try:
            while producer.alive:
                shown = _show(reader, shown)
                if not aggregator.alive:
                    _say(f"aggregator exited:\n{aggregator.log_tail(40)}")
                    return 1
                time.sleep(0.5)
            raw = [json.loads(line)["value"] for line in events_file.read_text().splitlines()]
            expected = expected_results(raw, WINDOW_MS, DELAY_MS)
            _say(f"producer done; waiting for the last of {len(expected)} closed windows")
            deadline = time.monotonic() + 60
            while reader.meta().last_seq < len(expected) and time.monotonic() < deadline:
                shown = _show(reader, shown)
                time.sleep(0.5)
            shown = _show(reader, shown)
        finally:
            aggregator.stop(timeout=30)
            producer.stop()
        report = compare(expected, list(reader.iter_all()))
        meta = reader.meta()
        _say(f"epoch {meta.epoch}, seqs {meta.first_seq}..{meta.last_seq}, counters {meta.counters}")
        _say(("OK, exactly once: " if report.ok else "MISMATCH: ") + report.summary())
        _say(f"logs: {Path(workdir)}")
        return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
