"""What the two commit benchmarks (commit_throughput.py, replicated_commit.py) share: the window results they
commit, a timed pass of ``commit_batch`` calls, waiting out an AOF rewrite, the run's own record (command,
date, load, wall time) and the collapsed table of every repeat."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shlex
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from _common import TimedCell, int_list  # bench/ is sys.path[0]

from sparkwire.replaylog import Record, ReplayLogWriter
from sparkwire.replaylog.writer import DEFAULT_CHUNK_SIZE

METRICS = 50
WINDOW_MS = 10_000
QUERY_ID = "bench-query-0000"


def make_records(count: int, payload_bytes: int) -> list[Record]:
    """Window results shaped like ``sparkwire.aggregator.job.window_record`` makes them.

    ``processingId`` is sha1("<windowEnd>-<metricName>") as in the aggregator; the key is the metric
    name, so the state hash holds ``METRICS`` keys that are overwritten again and again. A payload
    shorter than ``payload_bytes`` is padded with a ``pad`` field.
    """
    base = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    records = []
    for i in range(count):
        metric = f"metric-{i % METRICS}"
        window_start = base + (i // METRICS) * WINDOW_MS
        window_end = window_start + WINDOW_MS
        pid = hashlib.sha1(f"{window_end}-{metric}".encode()).hexdigest()
        n = 1 + (i * 7919) % 500
        total = round(n * (40.0 + (i % 97) * 0.731), 3)
        document: dict[str, object] = {
            "avg": round(total / n, 6),
            "count": n,
            "max": round(60.0 + (i % 89) * 0.5, 3),
            "metricName": metric,
            "min": round(10.0 + (i % 83) * 0.25, 3),
            "processingId": pid,
            "sum": total,
            "windowEnd": window_end,
            "windowStart": window_start,
        }
        payload = json.dumps(document, separators=(",", ":"), sort_keys=True)
        if len(payload) < payload_bytes:
            document["pad"] = "x" * (payload_bytes - len(payload) - len(',"pad":""'))
            payload = json.dumps(document, separators=(",", ":"), sort_keys=True)
        records.append(Record(processing_id=pid, key=metric, payload=payload))
    return records


def commit_arguments(doc: str | None, records: int, chunk_help: str) -> argparse.ArgumentParser:
    """A parser with the arguments both commit benchmarks begin with; each adds its own after them."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0] if doc else None)
    parser.add_argument("--records", type=int, default=records, help="records per variant and repeat")
    parser.add_argument("--batch-sizes", type=int_list, default=[100, 500, 2000], help="e.g. 100,500,2000")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, help=chunk_help)
    return parser


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks.md"), help="'-' for stdout only")


def batches(records: Sequence[Record], batch_size: int) -> list[Sequence[Record]]:
    return [records[i : i + batch_size] for i in range(0, len(records), batch_size)]


def commit_timed(writer: ReplayLogWriter, records: Sequence[Record], batch_size: int) -> tuple[float, list[float]]:
    """Commit ``records`` as batches 0, 1, … of ``batch_size``: the seconds of the whole pass and of each call."""
    work = batches(records, batch_size)
    latencies = []
    started = time.perf_counter()
    for batch_id, batch in enumerate(work):
        t0 = time.perf_counter()
        writer.commit_batch(QUERY_ID, batch_id, batch)
        latencies.append(time.perf_counter() - t0)
    return time.perf_counter() - started, latencies


def records_committed(client: redis.Redis, writer: ReplayLogWriter) -> int:
    """What the writer's stream counts as committed, read from ``client`` (the primary, or a replica)."""
    return int(client.hget(writer.keys.meta, "records_committed") or 0)


def wait_aof_idle(client: redis.Redis, deadline: float) -> None:
    """Until no AOF rewrite runs or waits to run: one starting in a timed part would skew it."""
    while True:
        info = client.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("AOF rewrite did not finish within 60 s")
        time.sleep(0.02)


@dataclass
class BenchRun:
    """One run of a benchmark as its report states it: the command that runs it again, when it started, the
    load average before and (once :meth:`finish`\\ ed) after, and its wall time."""

    command: str
    date: str
    load_before: tuple[float, float, float]
    started: float
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    wall_seconds: float = 0.0

    @classmethod
    def begin(cls, script: str, argv: Sequence[str]) -> BenchRun:
        command = shlex.join([".venv/bin/python", script, *argv])
        load_before, started = os.getloadavg(), time.monotonic()
        return cls(command, dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), load_before, started)

    def finish(self) -> BenchRun:
        self.load_after = os.getloadavg()
        self.wall_seconds = time.monotonic() - self.started
        return self


def repeats_details(records: int, columns: Sequence[tuple[str, str]], variants: Sequence[str],
                    rows: Iterable[tuple[Sequence[str], Sequence[TimedCell[Any]]]]) -> list[str]:
    """The collapsed table of every repeat's records/s: ``columns`` (title, alignment) say what a row is, then
    one column per variant; a row is its ``columns``' texts and a cell per variant."""
    lines = [
        "<details><summary>Every repeat (records/s)</summary>",
        "",
        "| " + " | ".join([*(title for title, _ in columns), *variants]) + " |",
        "|" + "|".join([*(align for _, align in columns), *("---" for _ in variants)]) + "|",
    ]
    for texts, cells in rows:
        runs = [", ".join(f"{rate:,.0f}" for rate in cell.rates(records)) for cell in cells]
        lines.append("| " + " | ".join([*texts, *runs]) + " |")
    return [*lines, "", "</details>"]
