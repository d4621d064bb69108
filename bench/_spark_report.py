"""The spark_throughput section of docs/benchmarks.md, written from one run's measurements."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from _common import markers, quantile, reproduce_lines  # bench/ is sys.path[0]
from _spark_rates import DRIVER_MEMORY, RateVerdict, Rendered, RunSpec, per_window

THROUGHPUT_AIM = 100_000
DELAY_MS, TRIGGER_MS = 5_000, 500  # the job's defaults, which the latency run uses
CLOSE_AIM_MS = DELAY_MS + 1_000  # aim: window close -> render <= watermark delay + 1 s (p50)


def _ms(values: Sequence[float], q: float) -> str:
    return f"{quantile(sorted(values), q):,.0f}" if values else "n/a"


def _rate_rows(verdicts: Sequence[RateVerdict], labels: Sequence[str]) -> list[str]:
    return [
        f"| {label} | {v.rate:,} | {v.per_batch:,} | {len(v.measured)} | {v.duration_ms(0.5):,.0f} / "
        f"{v.duration_ms(0.95):,.0f} / {v.duration_ms(1):,.0f} | {v.capacity:,.0f} | "
        f"{'yes' if v.sustained else 'no' if v.full else 'no (a batch read less than its quota)'} |"
        for v, label in zip(verdicts, labels, strict=True)
    ]


def render(*, args: argparse.Namespace, date: str, wall: float, info: dict[str, str], command: str,
           load: tuple[tuple[float, ...], tuple[float, ...]], count: int, produce_s: float,
           verdicts: Sequence[RateVerdict], best: RateVerdict | None, check: tuple[RunSpec, bool, str, float],
           rendered: Sequence[Rendered], producer_cpu: float) -> str:
    start, end = markers("spark_throughput")
    spec, ok, summary, took = check
    header = ("| run | input events/s | events per batch | measured batches | batch p50 / p95 / max ms "
              "| capacity events/s | sustained |")
    rule = "|---|---:|---:|---:|---:|---:|---|"
    closes = [r.close_to_commit_ms for r in rendered if r.window_end_ms]
    renders = [r.commit_to_render_ms for r in rendered if r.window_end_ms]
    totals = [r.close_to_render_ms for r in rendered if r.window_end_ms]
    before, after = load
    lines = [
        start,
        "## Spark throughput: the aggregator's sustained input rate, and window close → render",
        "",
        "The real job (`sparkwire aggregate`: Kafka source, JSON parse with a dead-letter query, watermark,",
        "event-id dedup, tumbling windows, `foreachBatch` commit through the exactly-once script) in local mode",
        "on this machine, against a real Kafka broker and `redis-server` (AOF, `appendfsync always`), generated",
        "by `bench/spark_throughput.py` (method in its docstring).",
        "",
        *reproduce_lines(date, wall, f"flock /tmp/sparkwire-heavy.lock {command}"),
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}; "
        f"Redis {info['redis']}. Spark `local[2]` with a "
        f"{DRIVER_MEMORY} driver heap: driver, executors and Kafka share the 2 CPUs.",
        f"- Load average {before[0]:.2f} / {before[1]:.2f} / {before[2]:.2f} before, {after[0]:.2f} / "
        f"{after[1]:.2f} / {after[2]:.2f} after; the run held `/tmp/sparkwire-heavy.lock`.",
        f"- Backlog: {count:,} events (50 metrics, 8 sources, ~150-byte JSON "
        f"with a UUID event id; event time spread over 90 s), produced once in {produce_s:.0f} s by "
        "`sparkwire produce`; every run reads it "
        "from the start with a fresh checkpoint and `maxOffsetsPerTrigger` = rate x trigger, 2 Kafka "
        f"partitions. The first {args.warmup} non-empty batches of a run are not measured; then "
        f"{args.batches} (triggers up to 2 s) or {args.long_batches} (longer ones) are.",
        "- *Sustained*: every measured batch read its whole quota and the batches ended within the trigger "
        "interval (p95; the slowest within 1.25x). *Capacity*: events per second of batch time, what the job "
        "would take with no idle time between batches.",
        "",
        "### Input rate",
        "",
        header, rule,
        *_rate_rows(verdicts, [v.label for v in verdicts]),
        "",
        "Where a measured batch's time goes (p50 ms over its batches; Spark's `durationMs` of the progress, and",
        "the sink's own timing of its `foreachBatch` function: `collect()` runs the batch's plan — Kafka read,",
        "parse, dedup state, the batch's window aggregation — then the commit script writes the results to Redis):",
        "",
        "| run | events per batch | whole batch | latestOffset + getBatch | queryPlanning | addBatch "
        "| of which the plan (collect) | of which the Redis commit | walCommit + commitOffsets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *[f"| {v.label} | {v.per_batch:,} | {v.phase_ms('triggerExecution'):,.0f} | "
          f"{v.phase_ms('latestOffset') + v.phase_ms('getBatch'):,.0f} | {v.phase_ms('queryPlanning'):,.0f} | "
          f"{v.phase_ms('addBatch'):,.0f} | {v.phase_ms('collect'):,.0f} | {v.phase_ms('redis'):,.0f} | "
          f"{v.phase_ms('walCommit') + v.phase_ms('commitOffsets'):,.0f} |" for v in verdicts],
        "",
        "The dead-letter query (every record parsed a second time, malformed ones written to Kafka) runs",
        "beside the aggregate query on the same 2 cores; its time is in neither column. Rows marked \"no",
        "dead-letter query\" run the job with `--dead-letter-topic ''` (malformed records only counted).",
        "",

        f"**Exactly once at {spec.rate:,} events/s ({spec.label})**: the whole backlog read so "
        f"({took:.0f} s from the driver's start to the last result), the replay log compared with the oracle's "
        f"results computed from the produced records: {'OK' if ok else 'FAILED'} — {summary}.",
        "",
        "### Window close → render",
        "",
        f"Events produced at wall-clock time ({args.live_rate:,}/s for {args.live_seconds} s, heartbeats every "
        f"second; producer CPU {producer_cpu:.1f} s), the job with its defaults (window {10_000:,} ms, "
        f"watermark delay {DELAY_MS:,} ms, batches paced every {TRIGGER_MS:,} ms), a gateway and one "
        "`StreamClient`. Per result "
        f"({len(totals)} received):",
        "",
        "| span | p50 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|",
        f"| window end → commit (watermark delay, waiting for the next batch, the batch) | {_ms(closes, 0.5)} "
        f"| {_ms(closes, 0.99)} | {_ms(closes, 1)} |",
        f"| commit → client received | {_ms(renders, 0.5)} | {_ms(renders, 0.99)} | {_ms(renders, 1)} |",
        f"| window end → client received | {_ms(totals, 0.5)} | {_ms(totals, 0.99)} | {_ms(totals, 1)} |",
        "",
        "Per window, in window order (its results are committed in one batch): "
        + ", ".join(f"{span:,}" for _end, span in per_window(rendered)) + " ms.",
        "",
        "A window closes once an event (or heartbeat) at least `delay` past its end has been read, in the batch",
        "that reads it (the sink keeps the open windows; docs/replay-log.md, \"Where the windows are kept\"). The",
        "Kafka source starts a batch once the pacing interval has passed since the previous one, at no fixed phase",
        "to window ends: a window reaches the client about delay + the wait for the next batch (up to the",
        "interval) + one batch after its end.",
        "",
        "### Against the aims",
        "",
    ]
    rate = best.rate if best else 0
    how = f" ({best.label})" if best else ""
    lines.append(f"- ≥ {THROUGHPUT_AIM:,} input events/s on 2 cores with every micro-batch shorter than the trigger: "
                 + (f"**met**; sustained {rate:,} events/s{how}" if rate >= THROUGHPUT_AIM else
                    f"**not met**; highest sustained rate {rate:,} events/s{how}" if best else
                    "**not met**; no rate measured was sustained")
                 + f" (highest capacity measured {max((v.capacity for v in verdicts), default=0):,.0f} events/s).")
    close_p50 = quantile(sorted(totals), 0.5) if totals else float("nan")
    lines.append(f"- Window close → render ≤ delay + 1 s ({CLOSE_AIM_MS:,} ms) p50 with the defaults: "
                 + ("**met**" if close_p50 <= CLOSE_AIM_MS else "**not met**") + f"; {close_p50:,.0f} ms p50.")
    lines += ["", end]
    return "\n".join(lines) + "\n"
