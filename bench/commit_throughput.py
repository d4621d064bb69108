"""Committed records/s through the exactly-once commit script vs raw pipelined XADD, in the same run.

Starts its own ``redis-server`` (``sparkwire_harness.stack.RedisServer``: AOF on, ``appendfsync always``) in a
temporary directory and, for each fsync policy and batch size, measures alternately:

(a) ``ReplayLogWriter.commit_batch``: batch marker, per-record ZSCORE dedup, XADD with explicit ids,
    ZADD, HSET of the latest state per key and trimming: each chunk staged, then the batch published in one call;
(b) raw ``XADD`` of the same payloads (same fields, auto ids), one non-transactional pipeline per batch:
    no dedup, no state, no marker. This is the lower bound of the work.

Each repeat writes into an empty database (FLUSHALL, then an AOF rewrite, both outside the timed part).
The results go into a marked section of docs/benchmarks.md; other sections of that file are kept.

    .venv/bin/python bench/commit_throughput.py
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

import redis
from _commits import (
    METRICS,
    BenchRun,
    add_output_argument,
    batches,
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
from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.writer import DEFAULT_RETENTION
from sparkwire_harness.stack import RedisServer

SECTION = "commit_throughput"
START_MARKER, END_MARKER = markers(SECTION)
@dataclass
class VariantRun:
    """One timed pass of one variant over all records."""

    seconds: float
    redis_cpu_seconds: float
    client_cpu_seconds: float
    call_latencies: list[float]


class Cell(TimedCell[VariantRun]):
    """All repeats of one variant at one (fsync, batch size)."""

    def cpu_us_per_record(self, records: int) -> float:
        return statistics.median(r.redis_cpu_seconds for r in self.runs) / records * 1e6

    def client_cpu_us_per_record(self, records: int) -> float:
        return statistics.median(r.client_cpu_seconds for r in self.runs) / records * 1e6


def redis_cpu_seconds(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def reset(client: redis.Redis) -> None:
    """Empty database and a freshly rewritten (small) AOF, so no rewrite starts in the timed part."""
    client.flushall()
    client.bgrewriteaof()
    wait_aof_idle(client, time.monotonic() + 60)


def run_script(
    client: redis.Redis, stream: str, records: Sequence[Record], batch_size: int, chunk_size: int, retention: int
) -> VariantRun:
    writer = ReplayLogWriter(client, stream, retention=retention, chunk_size=chunk_size)
    cpu_before, client_before = redis_cpu_seconds(client), time.process_time()
    seconds, latencies = commit_timed(writer, records, batch_size)
    client_cpu = time.process_time() - client_before
    cpu = redis_cpu_seconds(client) - cpu_before
    committed = records_committed(client, writer)
    if committed != len(records):
        raise RuntimeError(f"commit script committed {committed} records, expected {len(records)}")
    return VariantRun(seconds, cpu, client_cpu, latencies)


def run_raw(client: redis.Redis, stream: str, records: Sequence[Record], batch_size: int) -> VariantRun:
    log = StreamKeys(stream).log
    work = batches(records, batch_size)
    latencies = []
    cpu_before, client_before = redis_cpu_seconds(client), time.process_time()
    started = time.perf_counter()
    for batch_id, batch in enumerate(work):
        t0 = time.perf_counter()
        now_ms = int(time.time() * 1000)
        pipe = client.pipeline(transaction=False)
        for record in batch:
            fields: dict[str, str | int] = {"pid": record.processing_id, "key": record.key, "data": record.payload,
                                            "ts": now_ms, "batch": batch_id}
            pipe.xadd(log, fields)  # type: ignore[arg-type]  # redis-py's stub wants a dict of its own union
        pipe.execute()
        latencies.append(time.perf_counter() - t0)
    seconds = time.perf_counter() - started
    client_cpu = time.process_time() - client_before
    cpu = redis_cpu_seconds(client) - cpu_before
    length = client.xlen(log)
    if length != len(records):
        raise RuntimeError(f"raw XADD left {length} entries, expected {len(records)}")
    return VariantRun(seconds, cpu, client_cpu, latencies)


def summary(args: argparse.Namespace, results: dict[tuple[str, int], dict[str, Cell]]) -> list[str]:
    """What the tables say, computed from them (so it stays true when the numbers change)."""
    n = args.records
    out = ["**Reading the results** (computed from the tables above):", ""]
    for fsync in args.fsync:
        cells = [results[(fsync, b)] for b in args.batch_sizes]
        ratios = [c["script"].median_rate(n) / c["raw"].median_rate(n) for c in cells]
        server = [c["script"].cpu_us_per_record(n) / c["raw"].cpu_us_per_record(n) for c in cells]
        client = [c["script"].client_cpu_us_per_record(n) / c["raw"].client_cpu_us_per_record(n) for c in cells]
        out.append(
            f"- `appendfsync {fsync}`: end-to-end ratio {min(ratios):.2f}-{max(ratios):.2f} over batch sizes "
            f"{', '.join(f'{b:,}' for b in args.batch_sizes)}; the script costs Redis "
            f"{min(server):.1f}-{max(server):.1f}x the server CPU per record of a raw XADD, while the client "
            f"spends {min(client):.2f}-{max(client):.2f}x the CPU per record of the raw pipeline."
        )
    out += [
        "- A ratio near (or above) 1 with a higher Redis CPU per record means this client is the bottleneck:",
        "  redis-py builds and parses one command per record in a raw pipeline, but one `EVALSHA` per chunk",
        "  for the script, so the extra server work of exactly-once is hidden behind client overhead. The",
        "  Redis CPU ratio is the cost of exactly-once on the server, the part that limits a Redis shared by",
        "  many streams.",
        "- With `always`, Redis fsyncs the AOF once per event-loop pass before replying; a script chunk is one",
        "  command, while a large raw pipeline probably arrives over several socket reads and so pays several",
        "  fsyncs, which would explain raw XADD losing more than the script from `everysec` to `always`.",
    ]
    return out


def render(
    args: argparse.Namespace,
    run: BenchRun,
    info: dict[str, str],
    results: dict[tuple[str, int], dict[str, Cell]],
    payload_mean: float,
) -> str:
    n = args.records
    lines = [
        START_MARKER,
        "## Commit throughput: exactly-once commit script vs raw pipelined XADD",
        "",
        "Records/s committed into one stream's replay log through `ReplayLogWriter.commit_batch`",
        "(`services/sparkwire/replaylog/lua/stage_chunk.lua` per chunk, then `publish_batch.lua`: batch marker check,",
        "per-record `ZSCORE` dedup, `XADD` with an explicit `<seq>-0` id, `ZADD` of the processingId, `HSET`",
        "of the latest state per key, trimming) vs the same payloads sent as raw `XADD`s (same fields,",
        "auto ids) in one non-transactional pipeline per batch, with no dedup, no marker and no state: the",
        "lower bound of the work. Both variants run alternately in the same run against the same",
        "`redis-server` (AOF on), each repeat on an empty database; the timed part is the client side end to",
        "end (building the commands, network round trips, Redis work, fsync).",
        "",
        "**The ratio is the cost of exactly-once**: the share of raw-XADD throughput that remains when every",
        "batch also checks and moves its marker, deduplicates each record and updates the per-key state in",
        "one atomic script. A ratio of 0.5 means exactly-once commits run at half the speed of blind appends.",
        "",
        *reproduce_lines(run.date, run.wall_seconds, run.command),
        f"- Records per variant and repeat: {n:,}; repeats: {args.repeats} (medians shown); chunk size "
        f"{args.chunk_size}; retention {args.retention:,}",
        f"- Payload: JSON window result (metricName, windowStart, windowEnd, count, sum, min, max, avg,"
        f" processingId = 40-hex sha1), mean {payload_mean:.0f} bytes; key = metricName ({METRICS} keys)",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}",
        f"- Redis {info['redis']}, redis-py {info['redis_py']} (hiredis parser if installed), Python "
        f"{info['python']}; client and server on the same host over 127.0.0.1",
        f"- The machine is shared with other work (load average {run.load_before[0]:.2f} before, "
        f"{run.load_after[0]:.2f} after); client and `redis-server` compete for the {info['nproc']} CPUs, so "
        "absolute numbers are indicative, the ratio (measured side by side) is the more stable figure.",
        "",
        "Columns: *script* = `commit_batch` records/s, *raw* = pipelined `XADD` records/s, *ratio* =",
        "script/raw (of the medians); *Redis CPU* = server CPU per record (`INFO cpu` used_cpu_sys +",
        "used_cpu_user delta, main process incl. its threads), *client CPU* = CPU of the Python benchmark",
        "process per record (redis-py building commands and parsing replies); *p50/p99* = latency of one",
        "`commit_batch` call (one batch) and of one raw pipeline, over all repeats (nearest rank; with few",
        "calls p99 is the slowest call).",
        "",
    ]
    for fsync in args.fsync:
        production = " (production setting)" if fsync == "always" else ""
        lines += [
            f"### `appendfsync {fsync}`{production}",
            "",
            "| batch size | script rec/s | raw rec/s | ratio | Redis CPU µs/rec script / raw "
            "| client CPU µs/rec script / raw | script p50 / p99 ms | raw p50 / p99 ms | calls |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for batch_size in args.batch_sizes:
            cell = results[(fsync, batch_size)]
            script, raw = cell["script"], cell["raw"]
            ratio = script.median_rate(n) / raw.median_rate(n)
            lines.append(
                f"| {batch_size:,} | {script.median_rate(n):,.0f} | {raw.median_rate(n):,.0f} | {ratio:.2f} "
                f"| {script.cpu_us_per_record(n):.1f} / {raw.cpu_us_per_record(n):.1f} "
                f"| {script.client_cpu_us_per_record(n):.1f} / {raw.client_cpu_us_per_record(n):.1f} "
                f"| {script.latency_ms(0.5):.2f} / {script.latency_ms(0.99):.2f} "
                f"| {raw.latency_ms(0.5):.2f} / {raw.latency_ms(0.99):.2f} | {script.samples()} |"
            )
        lines.append("")
    lines += [*summary(args, results), ""]
    repeats = (([fsync, f"{batch_size:,}"], [results[(fsync, batch_size)][v] for v in ("script", "raw")])
               for fsync in args.fsync for batch_size in args.batch_sizes)
    lines += [*repeats_details(n, [("fsync", "---"), ("batch size", "---:")], ["script", "raw"], repeats), END_MARKER]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = commit_arguments(__doc__, 50_000, "records per script call")
    parser.add_argument("--retention", type=int, default=DEFAULT_RETENTION, help="entries kept per stream")
    parser.add_argument(
        "--payload-bytes",
        type=int,
        default=0,
        help="pad each JSON payload to at least this size; 0 (default) keeps the realistic document as is "
        "(about 190 bytes: nine fields incl. a 40-hex processingId)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fsync", choices=["always", "everysec", "both"], default="both")
    add_output_argument(parser)
    args = parser.parse_args(argv)
    args.fsync = ["always", "everysec"] if args.fsync == "both" else [args.fsync]
    if args.records < 1 or args.repeats < 1 or args.chunk_size < 1:
        parser.error("--records, --repeats and --chunk-size must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    records = make_records(args.records, args.payload_bytes)
    payload_mean = statistics.fmean(len(r.payload) for r in records)
    run_record = BenchRun.begin("bench/commit_throughput.py", argv)
    results: dict[tuple[str, int], dict[str, Cell]] = {}
    with tempfile.TemporaryDirectory(prefix="sparkwire-bench-") as tmp, RedisServer(Path(tmp)) as server:
        client = server.client()
        info = machine_info(client)
        # warm up: load the script, let both code paths run once
        reset(client)
        run_script(client, "warmup", records[:1000], 500, args.chunk_size, args.retention)
        run_raw(client, "warmup-raw", records[:1000], 500)
        for fsync in args.fsync:
            client.config_set("appendfsync", fsync)
            if client.config_get("appendfsync")["appendfsync"] != fsync:
                raise RuntimeError(f"could not set appendfsync {fsync}")
            for batch_size in args.batch_sizes:
                cell = results[(fsync, batch_size)] = {"script": Cell(), "raw": Cell()}
                for repeat in range(args.repeats):
                    # alternate the order so drift on a shared machine hits both variants alike
                    order = ("script", "raw") if repeat % 2 == 0 else ("raw", "script")
                    for variant in order:
                        reset(client)
                        stream = f"bench-{fsync}-{batch_size}-{repeat}"
                        if variant == "script":
                            run = run_script(client, stream, records, batch_size, args.chunk_size, args.retention)
                        else:
                            run = run_raw(client, stream, records, batch_size)
                        cell[variant].runs.append(run)
                        print(
                            f"fsync={fsync:<8} batch={batch_size:<6} repeat={repeat} {variant:<6} "
                            f"{args.records / run.seconds:>10,.0f} rec/s  redis cpu {run.redis_cpu_seconds:.2f}s",
                            file=sys.stderr,
                        )
                script_rate = cell["script"].median_rate(args.records)
                raw_rate = cell["raw"].median_rate(args.records)
                print(
                    f"fsync={fsync} batch={batch_size}: script {script_rate:,.0f} rec/s, raw {raw_rate:,.0f} rec/s,"
                    f" ratio {script_rate / raw_rate:.2f}",
                    file=sys.stderr,
                )
        client.close()
    section = render(args, run_record.finish(), info, results, payload_mean)
    emit_section(args.output, SECTION, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
