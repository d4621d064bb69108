"""Where a client's entries part from the log's, and waiting until a run's results are all committed."""

from __future__ import annotations

import json
from typing import Any, ClassVar, cast

import pytest

from sparkwire.client import StreamClient
from sparkwire.producer.events import GeneratorConfig
from sparkwire.replaylog.model import Entry
from sparkwire_harness.e2e.journal import ConnectionJournal, ConnectionRecord
from sparkwire_harness.kind.checks import assert_clients_exactly_once, first_difference, view_entries, wait_for_results
from sparkwire_harness.kind.clients import Tracked
from sparkwire_harness.kind.production import Production
from sparkwire_harness.kind.release import Release
from sparkwire_harness.kind.views import VIEWS, ClientView

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


def entry(seq: int, metric: str | None, count: object) -> Entry:
    data = {"windowEnd": seq * 1000, "count": count} | ({"metricName": metric} if metric is not None else {})
    return Entry(seq=seq, processing_id=f"p{seq}", key=str(metric), data=json.dumps(data), commit_ms=0, batch_id=0)


LOG = [entry(1, "metric-0", 60), entry(2, "metric-5", 40), entry(3, "metric-1", 50), entry(4, "metric-9", None),
       entry(5, None, 70), entry(6, "metric-5", 55), entry(7, "metric-2", True)]


def test_a_views_entries_are_what_its_oracle_admits_after_its_start() -> None:
    three, busy, tenant, tenant_one = VIEWS
    assert view_entries(LOG, None, after=2) == [(s, f"p{s}") for s in range(3, 8)]
    assert view_entries(LOG, three, after=0) == [(1, "p1"), (3, "p3"), (7, "p7")]
    # A null count, a missing field and a boolean are no numbers: a comparison admits none of them.
    assert view_entries(LOG, busy, after=0) == [(1, "p1"), (3, "p3"), (5, "p5"), (6, "p6")]
    assert view_entries(LOG, tenant, after=2) == [(6, "p6")]
    assert view_entries(LOG, tenant_one, after=0) == [(2, "p2"), (6, "p6")]


class Stats:
    duplicates = gaps = 0
    resets: ClassVar[dict[str, int]] = {"no_position": 1}


class FakeClient:
    def __init__(self, applied: list[tuple[int, str]]) -> None:
        self.applied = applied

    def stats(self) -> Stats:
        return Stats()


def tracked(applied: list[tuple[int, str]], view: ClientView | None) -> Tracked:
    journal = ConnectionJournal(closes=dict)
    journal.records.append(ConnectionRecord(reset="no_position", welcomed=True, applied_snapshot=0))
    return Tracked(cast(StreamClient, FakeClient(applied)), journal, view)


@pytest.mark.parametrize("applied, problem", [
    ([(1, "p1"), (3, "p3")], "applied 2 of 3"),  # one missing
    ([(1, "p1"), (2, "p2"), (3, "p3"), (7, "p7")], "applied 4 of 3"),  # one outside the view
    ([(1, "p1"), (3, "p3"), (3, "p3"), (7, "p7")], "applied 4 of 3"),  # one twice
])
def test_a_filtered_client_is_held_to_its_own_views_entries(applied: list[tuple[int, str]], problem: str) -> None:
    view = VIEWS[0]
    assert_clients_exactly_once([tracked([(1, "p1"), (3, "p3"), (7, "p7")], view)], LOG, [])
    with pytest.raises(AssertionError, match=rf"client 0 \(three metrics\): {problem}"):
        assert_clients_exactly_once([tracked(applied, view)], LOG, [])
