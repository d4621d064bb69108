"""Where a client's entries part from the log's, and waiting until a run's results are all committed."""

from __future__ import annotations

from typing import Any

import pytest

from sparkwire.producer.events import GeneratorConfig
from sparkwire_harness.kind.checks import first_difference, wait_for_results
from sparkwire_harness.kind.production import Production
from sparkwire_harness.kind.release import Release

from .conftest import FakeClock

RELEASE = Release(stream="metrics", bootstrap_servers="k:9092", topic="raw", window_ms=10_000, delay_ms=5_000,
                  gateway_image="gw:1", gateway_replicas=3, token=None)


def test_first_difference() -> None:
    assert first_difference([(1, "a"), (2, "b")], [(1, "a"), (2, "x")]) == {"index": 1, "applied": (2, "b"),
                                                                           "log": (2, "x")}
    assert first_difference([(1, "a")], [(1, "a"), (2, "b")]) == {"index": 1, "applied_len": 1, "log_len": 2}


class GrowingLog:
    """A log that gets one more of the wanted results at each read."""

    def __init__(self, wanted: list[str]) -> None:
        self.wanted, self.reads = wanted, 0

    def log(self, _stream: str) -> list[Any]:
        self.reads += 1
        return [type("E", (), {"processing_id": pid})() for pid in self.wanted[: self.reads]]


PRODUCTION = Production("produce-1", GeneratorConfig(seed=3, metrics=2, rate=50.0, start_ms=1_700_000_000_000),
                        count=2_000)


def test_wait_for_results_returns_once_every_expected_result_is_in_the_log(clock: FakeClock) -> None:
    wanted = sorted(PRODUCTION.expected(RELEASE.window_ms, RELEASE.delay_ms))
    log = GrowingLog(wanted)
    wait_for_results(log, RELEASE, PRODUCTION, timeout=len(wanted) * 3 + 10)
    assert log.reads == len(wanted)


def test_wait_for_results_says_how_many_are_missing(clock: FakeClock) -> None:
    wanted = sorted(PRODUCTION.expected(RELEASE.window_ms, RELEASE.delay_ms))
    with pytest.raises(AssertionError, match=rf"{len(wanted) - 2} of {len(wanted)} expected results not committed"):
        wait_for_results(GrowingLog(wanted[:2]), RELEASE, PRODUCTION, timeout=30)
