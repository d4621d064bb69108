from __future__ import annotations

import json
import signal

import pytest

from sparkwire.aggregator.job import window_record
from sparkwire.spark.delivery.faults import Fault, FaultInjector


def test_a_window_row_becomes_a_record_keyed_by_metric_with_a_stable_payload() -> None:
    row = {"processingId": "abc", "metricName": "cpu", "windowStart": 0, "windowEnd": 1000, "count": 2,
           "sum": 3.0, "min": 1.0, "max": 2.0, "avg": 1.5}
    record = window_record(row)
    assert (record.processing_id, record.key) == ("abc", "cpu")
    assert json.loads(record.payload) == row
    assert window_record(dict(reversed(list(row.items())))).payload == record.payload


@pytest.mark.parametrize("text", ["after-commit", "nowhere@3", "mid-batch@x", "@1"])
def test_fault_specs_are_checked(text: str) -> None:
    with pytest.raises(ValueError, match="point"):
        Fault.parse(text)


def test_a_fault_fires_only_at_its_point_and_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    kills: list[int] = []
    monkeypatch.setattr("os.kill", lambda pid, sig: kills.append(sig))
    monkeypatch.setattr("os.killpg", lambda pgid, sig: kills.append(sig))
    monkeypatch.setattr("os.getpgrp", lambda: -1)  # not a group leader: only os.kill

    FaultInjector(None).reached("after-commit", 2)
    injector = FaultInjector(Fault("after-commit", 2))
    injector.reached("after-commit", 1)
    injector.reached("before-commit", 2)
    assert kills == []

    injector.reached("after-commit", 2)
    assert kills == [signal.SIGKILL]
