"""Compares what a replay log (or a client) holds with the expected results: exactly once, in order."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sparkwire.replaylog.model import Entry
from sparkwire_harness.verify.expected import WindowResult

REL_TOLERANCE = 1e-9  # Spark and Python add doubles in different orders


@dataclass
class Report:
    entries: int = 0
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    seq_problems: list[str] = field(default_factory=list)
    value_mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.duplicated or self.seq_problems
                    or self.value_mismatches)

    def summary(self) -> str:
        parts = [f"{self.entries} entries"]
        for name in ("missing", "unexpected", "duplicated", "seq_problems", "value_mismatches"):
            items: list[str] = getattr(self, name)
            if items:
                parts.append(f"{name}={len(items)} e.g. {items[:3]}")
        return "; ".join(parts)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOLERANCE, abs_tol=1e-9)


def _value_problems(result: WindowResult, data: Mapping[str, object]) -> list[str]:
    want: dict[str, object] = {
        "metricName": result.metric, "windowStart": result.window_start, "windowEnd": result.window_end,
        "count": result.count, "sum": result.total, "min": result.minimum, "max": result.maximum,
        "avg": result.average,
    }
    problems = []
    for name, expected in want.items():
        got = data.get(name)
        if isinstance(expected, float):
            if not (isinstance(got, int | float) and _close(float(got), expected)):
                problems.append(f"{name}: {got!r} != {expected!r}")
        elif got != expected:
            problems.append(f"{name}: {got!r} != {expected!r}")
    return problems


def check_seqs(seqs: Sequence[int], first: int = 1) -> list[str]:
    """Seqs must be first, first+1, ... with no hole and no repeat."""
    return [f"position {i}: seq {seq} where {first + i} was due"
            for i, seq in enumerate(seqs) if seq != first + i][:20]


def compare(expected: Mapping[str, WindowResult], entries: Sequence[Entry], first_seq: int = 1) -> Report:
    report = Report(entries=len(entries))
    report.seq_problems = check_seqs([e.seq for e in entries], first_seq)
    counts = Counter(e.processing_id for e in entries)
    report.duplicated = sorted(pid for pid, n in counts.items() if n > 1)
    report.missing = sorted(set(expected) - set(counts))
    report.unexpected = sorted(set(counts) - set(expected))
    for entry in entries:
        result = expected.get(entry.processing_id)
        if result is None:
            continue
        problems = _value_problems(result, json.loads(entry.data))
        if problems:
            report.value_mismatches.append(f"{entry.processing_id}: {'; '.join(problems)}")
    return report
