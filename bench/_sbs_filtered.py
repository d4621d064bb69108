"""The filtered mode of the side-by-side benchmark (issue 43, "Cost"): sparkwire's gateway with every client
unfiltered, and with the clients spread over K distinct filters, alternately in one run; the results go into
their own marked section of docs/benchmarks.md.

What is compared: **delivered entries per gateway CPU second** (entries the clients received, all clients
together, over the gateway process's own CPU time) with the same delivered load per client. Client i's
hello carries ``{"tenant": "t<i mod K>"}``; the entry at seq s carries ``"tenant": "t<(s-1) mod K>"``
(``_servers.TenantCommitter``), so each filter admits exactly every K-th entry. The filtered runs publish K
times the entries per commit (rate x K entries/s), so a filtered client receives as many entries per second
as an unfiltered one, and one per frame at 10 entries/s for both; the gateway evaluates K times the log
for it. The entries of the log x clients the gateway accounted for (delivered or filtered out) per CPU
second are reported beside it. Every client checks every entry it receives against its own filter and its
count against the seqs its filter admits (bench/loadgen/view.go): a run that delivers nothing cannot pass.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import markers
from _loadgen import GoLoadGen
from _sbs_measure import Idle, Phase, run_server
from _servers import Publisher

from sparkwire_harness.stack import RedisServer

SECTION = "side_by_side_filtered"
AIM_RATIO = 0.8
AIM_CASE = (5000, 100)


@dataclass(frozen=True)
class Case:
    clients: int
    filters: int
    repeats: int


def parse_cases(text: str) -> list[Case]:
    """``clients:filters:repeats,…`` (repeats of the unfiltered/filtered pair)."""
    cases = []
    for part in text.split(","):
        clients, filters, repeats = (int(x) for x in part.split(":"))
        cases.append(Case(clients, filters, repeats))
    return cases


@dataclass
class Run:
    case: Case
    repeat: int
    idle: Idle
    phase: Phase


def run_filtered(args: argparse.Namespace, redis: RedisServer, publisher: Publisher, loadgen: GoLoadGen,
                 workdir: Path) -> list[Run]:
    """Per case and repeat, one unfiltered and one filtered gateway run (the order alternating per repeat)
    on the same stream, the publisher's tenants set to the case's K for both."""
    runs: list[Run] = []
    for case in args.filtered_cases:
        publisher.committer.tenants = case.filters
        for repeat in range(case.repeats):
            for filters in ((0, case.filters) if repeat % 2 == 0 else (case.filters, 0)):
                idle, phases = run_server("sparkwire", case.clients, [args.filtered_rate], args, redis, publisher,
                                          loadgen, workdir, filters=filters)
                runs += [Run(case, repeat, idle, phase) for phase in phases]
                if publisher.head() != publisher.committer.committed:
                    raise SystemExit(f"the stream has {publisher.head()} entries, the publisher wrote"
                                     f" {publisher.committer.committed}: the tenants no longer follow the seqs")
    return runs


def _ratio(value: float) -> str:
    return "n/a" if value != value else f"{value:.2f}x" if value >= 0.1 else f"{value:.3f}x"


def _num(value: float, digits: int = 0) -> str:
    return "n/a" if value != value else f"{value:,.{digits}f}"


def _once(p: Phase) -> str:
    s = p.seen
    text = f"{s.received:,} of {s.expected:,}; {s.complete:,}/{s.clients:,}"
    if s.exactly_once:
        return text + " yes"
    parts = [f"{n:,} {what}" for n, what in ((s.lost, "lost"), (s.duplicates, "duplicated"), (s.resets, "resets"),
                                             (s.wrong, "outside the filter"), (s.behind, "behind")) if n]
    return text + " **no**: " + ", ".join(parts or ["incomplete"])


def ratios(runs: Sequence[Run], case: Case) -> list[float]:
    """Filtered over unfiltered delivered per CPU s, per repeat (the pair measured back to back)."""
    out = []
    for repeat in range(case.repeats):
        pair = {r.phase.filters: r.phase for r in runs if r.case == case and r.repeat == repeat}
        plain, filtered = pair.get(0), pair.get(case.filters)
        if plain and filtered and plain.per_cpu:
            out.append(filtered.per_cpu / plain.per_cpu)
    return out


def summary(runs: Sequence[Run], case: Case) -> tuple[float, float, float]:
    """Median delivered per CPU s unfiltered, filtered, and their ratio."""
    def median(filters: int) -> float:
        values = [r.phase.per_cpu for r in runs if r.case == case and r.phase.filters == filters]
        return statistics.median(values) if values else float("nan")

    plain, filtered = median(0), median(case.filters)
    return plain, filtered, filtered / plain if plain else float("nan")


def render(args: argparse.Namespace, command: str, info: dict[str, str], load: Sequence[float],
           runs: Sequence[Run]) -> str:
    start, end = markers(SECTION)
    rate, interval = args.filtered_rate, args.commit_interval_ms
    lines = [
        start,
        "## Filtered subscriptions: delivered entries per gateway CPU second, filtered vs unfiltered",
        "",
        "Issue 43's cost aim: with 5,000 clients spread over 100 distinct filters the gateway delivers at least"
        f" {AIM_RATIO}x the entries per CPU second it delivers to 5,000 unfiltered clients; 10,000 clients over"
        " 1,000 filters measured. One gateway (`sparkwire gateway`, uvicorn, `--insecure-no-auth`) pinned to CPU 0,"
        " the Go load generator (`bench/loadgen`) on CPU 1, one Redis, runs of each case alternating unfiltered /"
        " filtered (the order swapped every repeat) in one run on the same stream. Reproduce with:",
        "",
        "```sh",
        f"flock /tmp/sparkwire-heavy.lock {command}",
        "```",
        "",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}; Redis {info['redis']}"
        f" (AOF, `appendfsync always`), Python {info['python']}. Shared with other work: load average"
        f" {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the start, {load[3]:.2f} at the end; the run held"
        " `/tmp/sparkwire-heavy.lock`.",
        f"- Stream: each result carries `\"tenant\": \"t<(seq-1) mod K>\"` (~{args.payload_bytes}-byte payloads), one"
        f" commit every {interval} ms. Filtered client i says `{{\"tenant\": \"t<i mod K>\"}}`, so each filter admits"
        " every K-th entry and clients / K clients share each filter (50 at 5,000 / 100, 10 at 10,000 / 1,000).",
        f"- Same delivered load per client: unfiltered runs publish {rate} entries/s ({round(rate * interval / 1000)}"
        f" per commit); filtered runs publish {rate} x K entries/s, so every client, filtered or not, receives"
        f" {rate} entries/s, one per frame. {args.warmup:g} s warm-up, {args.duration:g} s of publishing measured,"
        " then until every client holds the last entry (a filtered client's cursor moves past what it does not"
        " receive by position frames, at most one a second).",
        "- *Delivered*: entries the clients received, all together (a filtered client's own entries only).",
        " *Delivered per CPU s*: that over the gateway process's CPU time in the phase (`/proc/<pid>/stat`)."
        " *Evaluated per CPU s*: the log positions every client's cursor moved past in the phase, summed over"
        " clients (the (entry, client) pairs the gateway accounted for, delivered or filtered out), per CPU"
        " second; for unfiltered clients it equals delivered.",
        "- Exactly once: every filtered client checks each entry it receives against its own filter, the"
        " coverage `(after, through]` of every frame for holes and repeats, and its count against the seqs its"
        " filter admits; *received of expected* sums those counts.",
        "",
        "| clients | filters | repeat | log entries/s | delivered/s | gateway CPU s | delivered per CPU s |"
        " evaluated per CPU s | p50 / p99 ms | idle KB per connection | received of expected; clients complete |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        p = r.phase
        lines.append(
            f"| {p.clients:,} | {p.filters or 'none'} | {r.repeat + 1} | {_num(p.published / p.publish_seconds)}"
            f" | {_num(p.delivered_per_s)} | {p.server_cpu:.2f} | {_num(p.per_cpu)} | {_num(p.evaluated_per_cpu)}"
            f" | {_num(p.seen.latency_ms(0.5), 1)} / {_num(p.seen.latency_ms(0.99), 1)}"
            f" | {_num(r.idle.kb_per_connection, 1)} | {_once(p)} |")
    lines += ["", "| clients / filters | delivered per CPU s, unfiltered (median) | filtered (median) | ratio"
              " (medians) | ratio per repeat | aim |", "|---|---:|---:|---:|---|---|"]
    for case in args.filtered_cases:
        plain, filtered, ratio = summary(runs, case)
        each = ", ".join(_ratio(x) for x in ratios(runs, case))
        aim = ("n/a (measured and reported)" if (case.clients, case.filters) != AIM_CASE
               else f"≥ {AIM_RATIO}x: " + ("**met**" if ratio >= AIM_RATIO else "**not met**"))
        lines.append(f"| {case.clients:,} / {case.filters:,} | {_num(plain)} | {_num(filtered)} | {_ratio(ratio)}"
                     f" | {each} | {aim} |")
    lines += ["", end]
    return "\n".join(lines) + "\n"
