"""The cost of waiting for a replica: ``commit_batch`` with ``replicas=0`` vs ``replicas=1``, same primary, same run.

Starts a real primary and a real replica (``sparkwire_harness.stack.RedisServer``: AOF on, ``appendfsync always``, as
in production), makes the replica follow the primary (``REPLICAOF`` at runtime) and, for each batch size,
commits the same window results alternately with:

(a) ``ReplayLogWriter(..., replicas=0)``: stage every chunk, publish; the replica still receives every write,
    asynchronously;
(b) ``ReplayLogWriter(..., replicas=1)``: the same, plus ``WAIT 1`` after the last chunk's stage and after
    the publish (docs/replay-log.md, "Across a failover").

Each repeat commits into an empty stream (a fresh name; the previous stream is deleted and both AOFs rewritten
outside the timed part, and the replica has caught up before the timed part starts). The results go into a
marked section of docs/benchmarks.md; other sections of that file are kept.

    .venv/bin/python bench/replicated_commit.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from _commits import (
    METRICS,
    BenchRun,
    add_output_argument,
    commit_arguments,
    commit_timed,
    make_records,
    records_committed,
    repeats_details,
    wait_aof_idle,
)
from _common import (  # bench/ is sys.path[0]
    TimedCell,
    emit_section,
    machine_info,
    markers,
    reproduce_lines,
)

from sparkwire.replaylog import Record, ReplayLogWriter
from sparkwire.replaylog.writer import DEFAULT_REPLICA_TIMEOUT_MS
from sparkwire_harness.stack import RedisServer

SECTION = "replicated_commit"
START_MARKER, END_MARKER = markers(SECTION)
VARIANTS = (0, 1)  # replicas= of the writer
SYNC_TIMEOUT_S = 30.0


@dataclass
class Run:
    """One timed pass of one variant over all records."""

    seconds: float
    call_latencies: list[float]
    waits: int  # WAIT commands the primary served during the pass
    aof_rewrites: int  # AOF rewrites (primary + replica) that ran during the pass


class Cell(TimedCell[Run]):
    """All repeats of one variant at one batch size."""

    def waits_per_batch(self) -> float:
        return sum(r.waits for r in self.runs) / self.samples()

    def aof_rewrites(self) -> int:
        return sum(r.aof_rewrites for r in self.runs)


@dataclass
class Row:
    """Both variants at one batch size, and what they say together."""

    batch_size: int
    plain: Cell
    waited: Cell

    def batches(self, records: int) -> int:
        return -(-records // self.batch_size)

    def ratio(self, records: int) -> float:
        return self.waited.median_rate(records) / self.plain.median_rate(records)

    def added_p50_ms(self) -> float:
        return self.waited.latency_ms(0.5) - self.plain.latency_ms(0.5)

    def added_mean_ms(self, records: int) -> float:
        """Extra wall time per batch, from the median pass times."""
        return (self.waited.median_seconds() - self.plain.median_seconds()) / self.batches(records) * 1e3


def wait_calls(client: redis.Redis) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


def aof_rewrites(client: redis.Redis) -> int:
    return int(client.info("persistence").get("aof_rewrites", 0))


def follow(primary: redis.Redis, replica: redis.Redis, primary_port: int) -> None:
    """Make ``replica`` a replica of the primary and wait until its link is up (the full sync is done)."""
    primary.config_set("repl-diskless-sync-delay", 0)  # else the primary waits 5 s for more replicas
    replica.replicaof("127.0.0.1", primary_port)
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while replica.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            raise RuntimeError(f"the replica did not sync within {SYNC_TIMEOUT_S:.0f} s")
        time.sleep(0.05)


def caught_up(primary: redis.Redis, replica: redis.Redis) -> None:
    """Wait until the replica has processed everything the primary wrote so far."""
    target = int(primary.info("replication")["master_repl_offset"])
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while int(replica.info("replication").get("slave_repl_offset", -1)) < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the replica did not catch up within {SYNC_TIMEOUT_S:.0f} s")
        time.sleep(0.01)


def rewrite_aofs(clients: Sequence[redis.Redis]) -> None:
    """A freshly rewritten (small) AOF on every node, so no automatic rewrite starts in the timed part."""
    deadline = time.monotonic() + 60
    for client in clients:
        wait_aof_idle(client, deadline)  # an automatic rewrite may be running: BGREWRITEAOF would be refused
        client.bgrewriteaof()
    for client in clients:
        wait_aof_idle(client, deadline)


def clear(primary: redis.Redis, replica: redis.Redis, writer: ReplayLogWriter) -> None:
    """Drop a pass's stream (replicated), then rewrite both AOFs and let the replica catch up."""
    primary.delete(*writer.keys.all(), writer.keys.staging)
    caught_up(primary, replica)
    rewrite_aofs([primary, replica])
    caught_up(primary, replica)


def run_pass(
    primary: redis.Redis,
    replica: redis.Redis,
    stream: str,
    records: Sequence[Record],
    batch_size: int,
    replicas: int,
    args: argparse.Namespace,
) -> Run:
    writer = ReplayLogWriter(primary, stream, chunk_size=args.chunk_size, replicas=replicas,
                             replica_timeout_ms=args.replica_timeout_ms)
    waits_before = wait_calls(primary)
    rewrites_before = aof_rewrites(primary) + aof_rewrites(replica)
    seconds, latencies = commit_timed(writer, records, batch_size)
    waits = wait_calls(primary) - waits_before
    rewrites = aof_rewrites(primary) + aof_rewrites(replica) - rewrites_before
    committed = records_committed(primary, writer)
    if committed != len(records):
        raise RuntimeError(f"replicas={replicas}: committed {committed} records, expected {len(records)}")
    if replicas:
        # WAIT after the publish: the replica must hold the whole pass already, without catching up.
        on_replica = records_committed(replica, writer)
        if on_replica != len(records):
            raise RuntimeError(f"replicas=1 returned but the replica holds {on_replica} of {len(records)} records")
    clear(primary, replica, writer)
    return Run(seconds, latencies, waits, rewrites)


def summary(records: int, rows: Sequence[Row]) -> list[str]:
    """What the table says, computed from it (so it stays true when the numbers change)."""
    added = [r.added_p50_ms() for r in rows]
    relative = [r.added_p50_ms() / r.plain.latency_ms(0.5) for r in rows]
    ratios = [r.ratio(records) for r in rows]
    waits = [r.waited.waits_per_batch() for r in rows]
    # a batch size where waiting came out free or faster is one where the wait is below this run's noise
    resolved = [r for r in rows if r.added_p50_ms() > 0 and r.ratio(records) < 1]
    unresolved = [r for r in rows if r not in resolved]
    spread = max((max(c.rates(records)) - min(c.rates(records))) / c.median_rate(records)
                 for r in rows for c in (r.plain, r.waited))
    waits_text = (f"exactly {waits[0]:.0f}" if max(waits) == min(waits)
                  else f"{min(waits):.2f}-{max(waits):.2f} (above 2: a WAIT timed out and the step was retried)")
    out = [
        "**Reading the results** (computed from the table above):",
        "",
        f"- The primary served {waits_text} `WAIT` commands per batch with `replicas=1`, at every batch size: "
        "two round trips per batch, not per record, as docs/replay-log.md says. Each lasts until the replica has "
        "applied (and, with its AOF, fsynced) what the primary wrote, so it grows with the batch.",
        f"- The median commit of one batch changes by {min(added):+.2f} to {max(added):+.2f} ms with the wait "
        f"({min(relative):+.0%} to {max(relative):+.0%} of the median without it); throughput with `replicas=1` "
        f"is {min(ratios):.2f}-{max(ratios):.2f}x that without.",
    ]
    if resolved:
        per_record = [r.added_p50_ms() * 1e3 / r.batch_size for r in resolved]
        trend = ("less than in proportion to the batch: the per-batch part weighs less as batches grow"
                 if len(resolved) > 1 and per_record[-1] < per_record[0] else "about in proportion to the batch")
        out.append(
            f"- Where the wait shows above the noise ({', '.join(f'{r.batch_size:,}' for r in resolved)}-record "
            f"batches) it adds {', '.join(f'{r.added_p50_ms():.2f} ms' for r in resolved)} per batch, i.e. "
            + ", ".join(f"{us:.1f} µs per record at {r.batch_size:,}"
                        for us, r in zip(per_record, resolved, strict=True))
            + f": it grows {trend}."
        )
    if unresolved:
        out.append(
            f"- At {', '.join(f'{r.batch_size:,}' for r in unresolved)}-record batches `replicas=1` came out as "
            f"fast or faster: the wait is below this run's noise there (the repeats of one variant and batch size "
            f"differ by up to {spread:.0%} in records/s); a run on a quiet machine, or more `--records`, is needed "
            "to resolve it."
        )
    return out


def render(args: argparse.Namespace, run: BenchRun, info: dict[str, str], rows: Sequence[Row],
           payload_mean: float) -> str:
    n = args.records
    rewrites = sum(r.plain.aof_rewrites() + r.waited.aof_rewrites() for r in rows)
    lines = [
        START_MARKER,
        "## Replicated commit: the cost of WAIT for a replica",
        "",
        "`ReplayLogWriter.commit_batch` (every chunk staged by `stage_chunk.lua`, then the batch published by",
        "`publish_batch.lua`) against a primary with one attached replica, with `replicas=0` (the replica",
        "receives the writes asynchronously) and with `replicas=1` (Redis `WAIT 1` on the same connection after",
        "the last chunk's stage and after the publish, so a batch is visible only once the replica holds it:",
        "docs/replay-log.md, \"Across a failover\"). Both variants run alternately in the same run against the",
        "same primary and replica, each repeat into an empty stream, with the replica caught up before each",
        "timed pass; the timed part is the client side end to end (commands, round trips, Redis work, fsync,",
        "and for `replicas=1` the replica's acknowledgement).",
        "",
        *reproduce_lines(run.date, run.wall_seconds, run.command),
        f"- Records per variant and repeat: {n:,}; repeats: {args.repeats} (medians shown); chunk size "
        f"{args.chunk_size}; `WAIT` timeout {args.replica_timeout_ms:,} ms",
        f"- Payload: JSON window result as in the commit throughput benchmark, mean {payload_mean:.0f} bytes; "
        f"key = metricName ({METRICS} keys)",
        "- Primary and replica: two `redis-server` processes on 127.0.0.1, both AOF on with `appendfsync always`"
        " (production setting), the replica attached with `REPLICAOF` (diskless sync)",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}",
        f"- Redis {info['redis']}, redis-py {info['redis_py']}, Python {info['python']}",
        f"- The machine is shared with other work (load average {run.load_before[0]:.2f} before, "
        f"{run.load_after[0]:.2f} after); client, primary and replica compete for the {info['nproc']} CPUs, so a",
        "  round trip to the replica includes waiting to be scheduled: absolute numbers are indicative.",
        f"- AOF rewrites during timed passes: {rewrites} (each pass starts from freshly rewritten AOFs)",
        "",
        "Columns: *rec/s* = records committed per second (median of the repeats); *ratio* = replicas=1 /",
        "replicas=0; *p50/p99* = latency of one `commit_batch` call (one batch) over all repeats (nearest",
        "rank; with few calls p99 is the slowest call); *added p50* = p50 with minus p50 without; *added mean*",
        "= (median pass time with minus without) / batches; *WAIT/batch* = `WAIT` commands the primary served per",
        "batch (`INFO commandstats`).",
        "",
        "| batch size | rec/s replicas=0 | rec/s replicas=1 | ratio | p50 / p99 ms replicas=0 "
        "| p50 / p99 ms replicas=1 | added p50 ms/batch | added mean ms/batch | WAIT/batch | calls per variant |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        plain, waited = row.plain, row.waited
        lines.append(
            f"| {row.batch_size:,} | {plain.median_rate(n):,.0f} | {waited.median_rate(n):,.0f} | {row.ratio(n):.2f} "
            f"| {plain.latency_ms(0.5):.2f} / {plain.latency_ms(0.99):.2f} "
            f"| {waited.latency_ms(0.5):.2f} / {waited.latency_ms(0.99):.2f} "
            f"| {row.added_p50_ms():+.2f} | {row.added_mean_ms(n):+.2f} | {waited.waits_per_batch():.2f} "
            f"| {waited.samples():,} |"
        )
    lines += ["", *summary(n, rows), ""]
    repeats = (([f"{row.batch_size:,}"], [row.plain, row.waited]) for row in rows)
    lines += [*repeats_details(n, [("batch size", "---:")], ["replicas=0", "replicas=1"], repeats), END_MARKER]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = commit_arguments(__doc__, 20_000, "records per stage call")
    parser.add_argument("--replica-timeout-ms", type=int, default=DEFAULT_REPLICA_TIMEOUT_MS,
                        help="WAIT timeout of the replicas=1 writer")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2,000 records, 1 repeat")
    add_output_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.repeats = 2_000, 1
    if args.records < 1 or args.repeats < 1 or args.chunk_size < 1 or args.replica_timeout_ms < 1:
        parser.error("--records, --repeats, --chunk-size and --replica-timeout-ms must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    records = make_records(args.records, 0)
    payload_mean = statistics.fmean(len(r.payload) for r in records)
    run_record = BenchRun.begin("bench/replicated_commit.py", argv)
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory(prefix="sparkwire-bench-") as tmp,
        RedisServer(Path(tmp) / "primary") as primary_server,
        RedisServer(Path(tmp) / "replica") as replica_server,
    ):
        primary, replica = primary_server.client(), replica_server.client()
        info = machine_info(primary)
        follow(primary, replica, primary_server.port)
        # warm up: load the scripts, run both code paths once
        for replicas in VARIANTS:
            run_pass(primary, replica, f"warmup-{replicas}", records[:1000], 500, replicas, args)
        for batch_size in args.batch_sizes:
            row = Row(batch_size, Cell(), Cell())
            for repeat in range(args.repeats):
                # alternate the order so drift on a shared machine hits both variants alike
                for replicas in VARIANTS if repeat % 2 == 0 else VARIANTS[::-1]:
                    stream = f"bench-r{replicas}-{batch_size}-{repeat}"
                    run = run_pass(primary, replica, stream, records, batch_size, replicas, args)
                    (row.waited if replicas else row.plain).runs.append(run)
                    print(
                        f"batch={batch_size:<6} repeat={repeat} replicas={replicas} "
                        f"{args.records / run.seconds:>10,.0f} rec/s  {run.waits} WAITs",
                        file=sys.stderr,
                    )
            rows.append(row)
            print(
                f"batch={batch_size}: replicas=0 {row.plain.median_rate(args.records):,.0f} rec/s, replicas=1 "
                f"{row.waited.median_rate(args.records):,.0f} rec/s, added p50 {row.added_p50_ms():+.2f} ms/batch",
                file=sys.stderr,
            )
        primary.close()
        replica.close()
    section = render(args, run_record.finish(), info, rows, payload_mean)
    emit_section(args.output, SECTION, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
