"""Recovery time of each fault, from the progress samples of a run (pure).

A fault has recovered when every client holds the first result the log committed after the fault
ended: the pipeline delivers again (a new commit) and the slowest client has it. Measured from the
fault's end — the kill, or the heal of a lasting fault — so a restart's own time counts as recovery.
Faults overlap in a chaos run: each is measured on its own, and a fault whose recovery another fault
delays gets the longer time, which is what a user would have seen. Two times per fault: until *every*
client holds that commit, and until every client not under a fault of its own path then (its edge link
cut or throttled, its process frozen) holds it: a client whose own link is blackholed sees nothing whatever
the pipeline does, and that is the link fault's recovery, measured on its own line.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
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


Window = tuple[float, float]
"""(start, end) in the samples' clock."""


@dataclass(frozen=True)
class Recovery:
    seconds: float | None
    """From the fault's end until every client not under a fault of its own held the first commit after
    it; None if never."""
    last: tuple[str, ...] = ()
    """The counted clients that held it last: below it in the sample before (all of them if never)."""
    every_client: float | None = None
    """The same, counting every client, those under a fault of their own too."""
    excused: tuple[str, ...] = ()
    """The clients left out: below the commit while a fault of their own path was on."""


def own_fault_windows(paths: Mapping[str, Collection[str]],
                      faults: Sequence[tuple[str, float, float]]) -> dict[str, list[Window]]:
    """Client id -> the windows of the faults on its own path. ``paths``: client id -> the fault targets
    on its path (its edge link, its process); ``faults``: (target, start, end) of each applied fault."""
    return {client: [(start, end) for target, start, end in faults if target in targets]
            for client, targets in paths.items()}


def _overlaps(windows: Sequence[Window], start: float, end: float) -> bool:
    return any(w_start <= end and w_end >= start for w_start, w_end in windows)


def recovery(samples: Sequence[Sample], ended_at: float,
             own_faults: Mapping[str, Sequence[Window]] | None = None) -> Recovery:
    """How long after ``ended_at`` the clients held the first commit after it, and who came last.
    ``own_faults``: client id -> windows of faults on its own path; a client below the commit while one
    overlapped the wait is left out of ``seconds`` (never of ``every_client``)."""
    own = own_faults or {}
    head_at_end = next((s.head for s in samples if s.t >= ended_at and s.head >= 0), None)
    if head_at_end is None:
        return Recovery(None)
    target: int | None = None
    previous: Sample | None = None
    seconds: float | None = None
    last: tuple[str, ...] = ()
    excused: set[str] = set()
    for sample in samples:
        if sample.t < ended_at:
            continue
        if target is None and sample.head > head_at_end:
            target = sample.head
        if target is None:
            previous = sample
            continue
        behind = {k for k, v in sample.seqs.items() if v < target}
        excused |= {k for k in behind if _overlaps(own.get(k, ()), ended_at, sample.t)}
        counted_done = not (behind - excused) if sample.seqs else sample.slowest >= target
        if seconds is None and counted_done:
            seconds = max(0.0, sample.t - ended_at)
            before: Mapping[str, int] = previous.seqs if previous is not None else {}
            last = tuple(sorted(k for k, v in before.items() if v < target and k not in excused))
        if sample.slowest >= target:
            return Recovery(seconds, last, max(0.0, sample.t - ended_at), tuple(sorted(excused)))
        previous = sample
    if seconds is None:
        final: Mapping[str, int] = previous.seqs if previous is not None and target is not None else {}
        last = tuple(sorted(k for k, v in final.items() if target is not None and v < target and k not in excused))
    return Recovery(seconds, last, None, tuple(sorted(excused)))


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
