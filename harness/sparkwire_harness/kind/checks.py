"""Exactly once, as tests/e2e/local checks it, on the kind cluster: every client holds the stream's entries
after its one snapshot, in order, with no duplicate, gap or second snapshot; the log's seqs have no hole or
repeat, no processingId twice, and a run's windows are exactly what ``sparkwire_harness.verify`` computes
from the produced records."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Protocol

from sparkwire.replaylog.model import Entry
from sparkwire_harness.e2e.journal import unexplained_resets
from sparkwire_harness.verify import check_seqs, compare

from .clients import Tracked
from .production import Production
from .progress import progress
from .release import Release
from .views import ClientView


class Log(Protocol):
    def log(self, stream: str) -> list[Entry]: ...


def assert_clients_exactly_once(clients: list[Tracked], log: list[Entry], events: list[str]) -> None:
    """From where each client started: after its one snapshot, every entry of the stream in order (of its
    view, for a filtered client: what the view's own oracle admits) — no duplicate, no gap, no second
    snapshot (a resume that failed)."""
    for index, tracked in enumerate(clients):
        stats = tracked.client.stats()
        tracked.journal.settle()
        connections = "; ".join(f"[{i}] {r.describe()}" for i, r in enumerate(tracked.journal.records))
        if stats.resets.get("no_position", 0) > 1:  # the evidence, also when the test passes
            progress(f"client {index}: {stats.resets['no_position']} no_position resets: {connections}")
        # A fresh client's every no_position is its own until one snapshot is whole: each earlier one must
        # be a connection that ended before its snapshot's last part, and none may come after it.
        problems = unexplained_resets(tracked.journal.records)
        assert len(tracked.snapshots) == 1 and set(stats.resets) == {"no_position"} and not problems, (
            f"client {index}: snapshots at {tracked.snapshots}, resets {stats.resets}, {problems}; "
            f"connections: {connections}; {events}")
        start = tracked.snapshots[0]
        expected = view_entries(log, tracked.view, after=start)
        name = f"client {index}" + (f" ({tracked.view.name})" if tracked.view else "")
        assert expected, f"{name}: no entry of its view was committed after it connected (seq {start})"
        assert tracked.client.applied == expected, (
            f"{name}: applied {len(tracked.client.applied)} of {len(expected)} after seq {start}; "
            f"first difference at {first_difference(tracked.client.applied, expected)}; {events}")
        assert (stats.duplicates, stats.gaps) == (0, 0), f"client {index}: {stats}"


def view_entries(log: list[Entry], view: ClientView | None, after: int) -> list[tuple[int, str]]:
    """(seq, processingId) of the log's entries after ``after`` that ``view`` holds (every one without a
    view), by the view's own oracle."""
    return [(e.seq, e.processing_id) for e in log
            if e.seq > after and (view is None or view.admits(json.loads(e.data)))]


def first_difference(a: list[tuple[int, str]], b: list[tuple[int, str]]) -> dict[str, object]:
    """Where two lists of (seq, processingId) part, for a failure message."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return {"index": i, "applied": x, "log": y}
    return {"index": min(len(a), len(b)), "applied_len": len(a), "log_len": len(b)}


def assert_log_exactly_once(log: list[Entry], production: Production, release: Release) -> None:
    """The replay log: seqs without a hole or repeat, no processingId twice, and this run's windows exactly
    the results computed independently from the produced records."""
    assert log, "the replay log is empty"
    seq_problems = check_seqs([e.seq for e in log], first=log[0].seq)
    assert not seq_problems, f"replay-log seqs: {seq_problems}"
    repeated = [pid for pid, n in Counter(e.processing_id for e in log).items() if n > 1]
    assert not repeated, f"processingIds committed twice: {repeated[:5]}"
    expected = production.expected(release.window_ms, release.delay_ms)
    mine = [e for e in log if json.loads(e.data).get("windowStart", 0) >= production.start_ms - release.window_ms]
    report = compare(expected, mine, first_seq=mine[0].seq if mine else 1)
    problems = {name: getattr(report, name) for name in ("missing", "unexpected", "duplicated", "value_mismatches")}
    assert not any(problems.values()), f"{report.summary()}"


def wait_for_results(redis_link: Log, release: Release, production: Production, timeout: float) -> None:
    """Until every expected result of ``production`` is in the log (the aggregator may be restarting)."""
    wanted = set(production.expected(release.window_ms, release.delay_ms))
    assert wanted, "the production closes no window: make it longer"
    deadline = time.monotonic() + timeout
    missing = wanted
    while time.monotonic() < deadline:
        present = {e.processing_id for e in redis_link.log(release.stream)}
        missing = wanted - present
        if not missing:
            return
        time.sleep(3)
    raise AssertionError(f"{len(missing)} of {len(wanted)} expected results not committed after {timeout}s")
