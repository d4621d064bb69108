"""Recovery time of each fault, from the progress samples of a run (pure).

A fault has recovered when every client holds the first result the log committed after the fault
ended: the pipeline delivers again (a new commit) and the slowest client has it. Measured from the
fault's end — the kill, or the heal of a lasting fault — so a restart's own time counts as recovery.
Faults overlap in a chaos run: each is measured on its own, and a fault whose recovery another fault
delays gets the longer time, which is what a user would have seen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sample:
    t: float
    head: int
    """The log's last seq (-1: Redis did not answer)."""
    slowest: int
    """The lowest last seq over the clients present (-1: none reported)."""
    seqs: Mapping[str, int] = field(default_factory=dict)
    """Each present client's last seq, by id: who the slowest were."""


@dataclass(frozen=True)
class Recovery:
    seconds: float | None
    """From the fault's end until every client held the first commit after it; None if never."""
    last: tuple[str, ...] = ()
    """The clients that held it last: below it in the sample before (all of them if never)."""


def recovery(samples: Sequence[Sample], ended_at: float) -> Recovery:
    """How long after ``ended_at`` every client held the first commit after it, and who came last."""
    head_at_end = next((s.head for s in samples if s.t >= ended_at and s.head >= 0), None)
    if head_at_end is None:
        return Recovery(None)
    target, previous = None, None
    for sample in samples:
        if sample.t < ended_at:
            continue
        if target is None and sample.head > head_at_end:
            target = sample.head
        if target is not None and sample.slowest >= target:
            behind: Mapping[str, int] = previous.seqs if previous is not None else {}
            return Recovery(max(0.0, sample.t - ended_at), tuple(sorted(k for k, v in behind.items() if v < target)))
        previous = sample
    last: Mapping[str, int] = previous.seqs if previous is not None and target is not None else {}
    return Recovery(None, tuple(sorted(k for k, v in last.items() if target is not None and v < target)))


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (a p99 of few values is their maximum, not an interpolation)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def summarize(times: Mapping[str, Sequence[float | None]]) -> list[str]:
    """One line per category: count, p50, p99, max, and how many never recovered."""
    lines = []
    for category, values in times.items():
        measured = [v for v in values if v is not None]
        never = len(values) - len(measured)
        if not measured:
            lines.append(f"  {category:<8} {len(values):>3} faults, none measured")
            continue
        lines.append(f"  {category:<8} {len(values):>3} faults  p50 {percentile(measured, 0.5):6.1f}s  "
                     f"p99 {percentile(measured, 0.99):6.1f}s  max {max(measured):6.1f}s"
                     + (f"  ({never} not recovered in the run)" if never else ""))
    return lines
