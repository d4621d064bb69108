"""Where a restarted driver's time goes, read from its structured log (pure functions; the driver recovery
benchmark measures, this splits).

A restart's log (the lines written after the new process started) has, in order: ``session_started`` (the
JVM and the SparkContext are up: ``sessionMs`` of it), ``query_started`` for the delivered query (its plan
built, its checkpoint opened), ``sink_commit`` of its first batch (the batch in flight at the kill, run
again from the offset log, then committed: the commit script refuses what was already appended), and that
batch's ``query_progress`` (Spark's own phases of it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Recovery:
    """One driver kill, in wall-clock seconds since the epoch (``nan`` where the log did not say)."""

    killed: float
    restarted: float
    session: float  # session_started
    session_ms: float  # of which building the SparkSession (JVM, SparkContext)
    query_started: float
    first_commit: float  # the first batch's sink_commit
    first_batch_ms: float  # that batch's durationMs
    first_batch_phases: dict[str, float]
    first_result: float  # commit time of the first result appended after the kill

    @property
    def spans(self) -> dict[str, float]:
        """Consecutive spans of the recovery, seconds."""
        return {
            "restart": self.restarted - self.killed,
            "python + JVM + SparkContext": self.session - self.restarted,
            "query start (plan, checkpoint)": self.query_started - self.session,
            "first batch (re-run, commit)": self.first_commit - self.query_started,
        }

    @property
    def back(self) -> float:
        """Kill to the first batch committed: the pipeline is live again."""
        return self.first_commit - self.killed

    @property
    def first_result_after(self) -> float:
        return self.first_result - self.killed


def _events(lines: Iterable[str]) -> list[dict[str, Any]]:
    events = []
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def _first(events: list[dict[str, Any]], event: str, name: str | None = None) -> dict[str, Any] | None:
    return next((e for e in events if e.get("event") == event and (name is None or e.get("name") == name)), None)


def recovery_from_log(lines: Iterable[str], *, killed: float, restarted: float, query: str,
                      first_result: float) -> Recovery:
    """The phases of one restart from the lines its driver logged."""
    events = _events(lines)
    nan = float("nan")
    session = _first(events, "session_started")
    started = _first(events, "query_started", query)
    commit = _first(events, "sink_commit")
    progress = None
    if commit is not None:
        progress = next((e for e in events if e.get("event") == "query_progress" and e.get("name") == query
                         and e.get("batchId") == commit.get("batchId")), None)
    return Recovery(
        killed=killed, restarted=restarted,
        session=float(session["ts"]) if session else nan,
        session_ms=float(session.get("sessionMs", nan)) if session else nan,
        query_started=float(started["ts"]) if started else nan,
        first_commit=float(commit["ts"]) if commit else nan,
        first_batch_ms=float(progress["durationMs"]) if progress else nan,
        first_batch_phases={k: float(v) for k, v in (progress or {}).get("phasesMs", {}).items()},
        first_result=first_result,
    )
