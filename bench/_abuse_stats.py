"""The figures of the abuse benchmark (``bench/abuse.py``): rows over time, RSS growth after warm-up, the
exactly-once check of the honest clients, latency quantiles and the markdown tables. Pure, so that it has
its own tests (``tests/unit/bench/test_abuse_stats.py``)."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from _common import quantile

RSS_AIM_PCT = 5.0


@dataclass(frozen=True)
class Sample:
    """The gateway process at one moment: seconds since the phase began, VmRSS (KiB), open fds, utime+stime
    (s), and attack connections started so far (0 without churn)."""

    t: float
    rss_kib: int
    fds: int
    cpu_s: float
    attacks: int = 0


@dataclass(frozen=True, slots=True)
class Latency:
    """One entry an honest client applied: when (seconds since the phase began) and commit → receive (ms)."""

    t: float
    ms: float


@dataclass(frozen=True)
class Row:
    """One interval of a phase: its end (s), the RSS and fds at its last sample, the most fds in it, the
    gateway's CPU (% of one core) over it, attacks started in it, and the honest entries received in it
    with their latency quantiles (ms; NaN when none)."""

    end: float
    rss_kib: int
    fds: int
    max_fds: int
    cpu_pct: float
    attacks: int
    entries: int
    p50: float
    p99: float
    max: float


def latency_quantiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(p50, p99, max) by nearest rank; NaN for no values."""
    ordered = sorted(values)
    return quantile(ordered, 0.5), quantile(ordered, 0.99), quantile(ordered, 1.0)


def rows(samples: Sequence[Sample], latencies: Sequence[Latency], row_seconds: float,
         slack: float = 0.5) -> list[Row]:
    """The phase cut into rows of ``row_seconds`` (the last one may be shorter); ``samples`` in time order,
    the first taken at the phase's start. A row ends at its last sample up to ``slack`` seconds past its
    nominal end (samples are due every second and taken a few ms late). A row with no sample is left out."""
    if not samples:
        return []
    out = []
    times = [x.t for x in latencies]  # in the order received: nondecreasing
    previous = samples[0]
    end = row_seconds
    last_t = samples[-1].t
    while previous.t < last_t:
        inside = [s for s in samples if previous.t < s.t < end + slack]
        if inside:
            last = inside[-1]
            span = last.t - previous.t
            cpu = 100.0 * (last.cpu_s - previous.cpu_s) / span if span > 0 else math.nan
            received = [x.ms for x in latencies[bisect_right(times, previous.t):bisect_right(times, last.t)]]
            p50, p99, top = latency_quantiles(received)
            out.append(Row(last.t, last.rss_kib, last.fds, max(s.fds for s in inside), cpu,
                           last.attacks - previous.attacks, len(received), p50, p99, top))
            previous = last
        end += row_seconds
    return out


@dataclass(frozen=True)
class Growth:
    """RSS after warm-up: the reference (the median of the samples in the ``window`` seconds ending at the
    warm-up's end), the largest and the last sample after it (KiB), and both as growth over the reference (%)."""

    warmup_s: float
    reference_kib: int
    max_kib: int
    end_kib: int

    @property
    def max_pct(self) -> float:
        return 100.0 * (self.max_kib - self.reference_kib) / self.reference_kib

    @property
    def end_pct(self) -> float:
        return 100.0 * (self.end_kib - self.reference_kib) / self.reference_kib

    @property
    def flat(self) -> bool:
        return self.max_pct <= RSS_AIM_PCT


def rss_growth(samples: Sequence[Sample], warmup_s: float, window: float = 10.0) -> Growth:
    """RSS after ``warmup_s`` against the RSS at its end; ``ValueError`` when no sample falls after it."""
    reference = sorted(s.rss_kib for s in samples if warmup_s - window <= s.t <= warmup_s)
    after = [s.rss_kib for s in samples if s.t > warmup_s]
    if not after:
        raise ValueError(f"no sample after the warm-up ({warmup_s:.0f} s): the phase is too short")
    if not reference:
        reference = [max((s for s in samples if s.t <= warmup_s), key=lambda s: s.t).rss_kib]
    return Growth(warmup_s, int(quantile(reference, 0.5)), max(after), after[-1])


@dataclass(frozen=True)
class Delivery:
    """One honest client against the log: seqs 1..head should each have been applied once, in order."""

    head: int
    applied: int
    missing: int
    repeated: int
    out_of_order: int
    duplicates_dropped: int
    gaps: int
    snapshots: int

    @property
    def exactly_once(self) -> bool:
        return not (self.missing or self.repeated or self.out_of_order or self.duplicates_dropped or self.gaps
                    or self.snapshots > 1) and self.applied == self.head


def delivery(seqs: Sequence[int], head: int, *, duplicates_dropped: int = 0, gaps: int = 0,
             snapshots: int = 1) -> Delivery:
    """``seqs`` (in the order applied) against every committed seq 1..``head``; ``duplicates_dropped`` and
    ``gaps`` as the client counted them, ``snapshots`` its snapshot starts (1: the first connection's, on an
    empty stream; more means entries were skipped)."""
    counts = Counter(seqs)
    missing = sum(1 for seq in range(1, head + 1) if seq not in counts)
    repeated = sum(n - 1 for n in counts.values() if n > 1)
    repeated += sum(n for seq, n in counts.items() if not 1 <= seq <= head)  # not committed at all
    out_of_order = sum(1 for a, b in pairwise(seqs) if b <= a)
    return Delivery(head, len(seqs), missing, repeated, out_of_order, duplicates_dropped, gaps, snapshots)


def _num(value: float, digits: int = 0) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


def mib(kib: float) -> str:
    return f"{kib / 1024:,.1f}"


def rows_table(table: Sequence[Row]) -> list[str]:
    lines = ["| t (s) | RSS (MiB) | open fds (end / max) | gateway CPU (% of a core) | attacks started "
             "| honest entries | p50 ms | p99 ms | max ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        lines.append(f"| {r.end:,.0f} | {mib(r.rss_kib)} | {r.fds:,} / {r.max_fds:,} | {_num(r.cpu_pct)} | "
                     f"{r.attacks:,} | {r.entries:,} | {_num(r.p50)} | {_num(r.p99)} | {_num(r.max)} |")
    return lines


@dataclass(frozen=True)
class PhaseSummary:
    """What the comparison table says of one phase (idle or under churn)."""

    name: str
    seconds: float
    clients: int
    deliveries: Sequence[Delivery]
    latencies_ms: Sequence[float]
    cpu_pct: float
    rss_start_kib: int
    rss_end_kib: int
    fds_start: int
    fds_end: int
    attacks: int = 0

    @property
    def exactly_once(self) -> int:
        return sum(1 for d in self.deliveries if d.exactly_once)


def summary_table(phases: Sequence[PhaseSummary]) -> list[str]:
    lines = ["| run | seconds | honest clients exactly once | entries applied | p50 ms | p99 ms | max ms "
             "| gateway CPU (% of a core) | RSS start → end (MiB) | fds start → end | attack connections |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in phases:
        p50, p99, top = latency_quantiles(p.latencies_ms)
        once = f"{p.exactly_once}/{p.clients}" + ("" if p.exactly_once == p.clients else " **NO**")
        lines.append(f"| {p.name} | {p.seconds:,.0f} | {once} | {sum(d.applied for d in p.deliveries):,} | "
                     f"{_num(p50)} | {_num(p99)} | {_num(top)} | {_num(p.cpu_pct)} | "
                     f"{mib(p.rss_start_kib)} → {mib(p.rss_end_kib)} | {p.fds_start:,} → {p.fds_end:,} | "
                     f"{p.attacks:,} |")
    return lines


def outcomes_table(outcomes: Mapping[str, Mapping[str, int]], expected: Mapping[str, Sequence[str]]) -> list[str]:
    """Per attack kind, how its connections ended (``outcomes``: kind → outcome → count) and whether each
    ending is one the docs give for it (``expected``: kind → outcomes documented)."""
    lines = ["| attack | connections | how they ended | as documented |", "|---|---:|---|---|"]
    for kind in sorted(outcomes):
        ended = outcomes[kind]
        listed = ", ".join(f"{n:,} {what}" for what, n in sorted(ended.items(), key=lambda kv: -kv[1]))
        other = sum(n for what, n in ended.items() if what not in expected.get(kind, ()))
        verdict = "yes" if not other else f"**{other:,} not**"
        lines.append(f"| {kind} | {sum(ended.values()):,} | {listed} | {verdict} |")
    return lines
