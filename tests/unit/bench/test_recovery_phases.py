"""bench/_recovery_phases.py: a restarted driver's log split into the spans of its recovery."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _recovery_phases import recovery_from_log

QUERY = "sparkwire-aggregate"


def line(ts: float, event: str, **fields: object) -> str:
    return json.dumps({"ts": ts, "level": "info", "msg": event, "event": event, **fields})


def test_the_spans_follow_the_drivers_log_in_order() -> None:
    log = [
        "=== 2026-11-26 08:00:00 start: python -m sparkwire.cli aggregate",
        "WARN some JVM line that is not JSON",
        line(108.0, "session_started", sessionMs=6500),
        line(109.0, "query_started", name="sparkwire-deadletter"),
        line(110.5, "query_started", name=QUERY),
        line(113.0, "sink_commit", batchId=41, appended=0),
        line(113.2, "query_progress", name="sparkwire-deadletter", batchId=41, durationMs=900),
        line(113.4, "query_progress", name=QUERY, batchId=41, durationMs=2600,
             phasesMs={"addBatch": 2000, "queryPlanning": 300}),
        line(114.0, "sink_commit", batchId=42, appended=5),
    ]
    recovery = recovery_from_log(log, killed=100.0, restarted=100.2, query=QUERY, first_result=120.0)
    spans = recovery.spans
    assert math.isclose(spans["restart"], 0.2)
    assert math.isclose(spans["python + JVM + SparkContext"], 7.8)
    assert math.isclose(spans["query start (plan, checkpoint)"], 2.5)
    assert math.isclose(spans["first batch (re-run, commit)"], 2.5)
    assert (recovery.back, recovery.first_result_after, recovery.session_ms) == (13.0, 20.0, 6500.0)
    # The first batch's own progress, not the dead-letter query's of the same id.
    assert recovery.first_batch_ms == 2600 and recovery.first_batch_phases["queryPlanning"] == 300


def test_what_the_log_never_said_is_not_a_number() -> None:
    recovery = recovery_from_log([line(105.0, "session_started", sessionMs=4000)], killed=100.0,
                                 restarted=100.1, query=QUERY, first_result=float("nan"))
    assert math.isclose(recovery.spans["python + JVM + SparkContext"], 4.9)
    assert math.isnan(recovery.back) and math.isnan(recovery.first_batch_ms)
    assert recovery.first_batch_phases == {}
