"""A run's events start after every earlier run's windows, on a window boundary, and the producer Job's
command produces exactly the events the expected results are computed from."""

from __future__ import annotations

import json

from sparkwire.replaylog.model import Entry
from sparkwire_harness.kind.production import Production, first_window_start, new_production
from sparkwire_harness.kind.release import Release

WINDOW, DELAY = 10_000, 5_000
RELEASE = Release(stream="metrics", bootstrap_servers="kafka:9092", topic="raw", window_ms=WINDOW, delay_ms=DELAY,
                  gateway_image="gw:1", gateway_replicas=3, token=None)


def entry(seq: int, window_end: int) -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key="k", data=json.dumps({"windowEnd": window_end}),
                 commit_ms=0, batch_id=seq)


def test_an_empty_stream_starts_a_window_past_the_clock() -> None:
    assert first_window_start(WINDOW, DELAY, [], now_ms=1_000_003_000) == 1_000_020_000


def test_a_run_starts_three_windows_past_the_last_committed_one() -> None:
    log = [entry(1, 2_000_000_000), entry(2, 2_000_010_000)]
    start = first_window_start(WINDOW, DELAY, log, now_ms=1_000_000_000)
    assert start % WINDOW == 0 and start > 2_000_010_000 + DELAY + 3 * WINDOW


def test_the_jobs_command_produces_the_events_expected_results_come_from() -> None:
    production = new_production(RELEASE, seconds=30, log=[], rate=100.0)
    assert production.count == 3000 and production.name == f"produce-{production.start_ms}"
    args = production.args(RELEASE)
    option = dict(zip(args[2::2], args[3::2], strict=False))
    assert args[:2] == ["sparkwire", "produce"] and args[-3:] == ["--realtime", "--log-level", "WARNING"]
    config = production.config
    assert (option["--bootstrap-servers"], option["--topic"], option["--count"]) == ("kafka:9092", "raw", "3000")
    assert (option["--seed"], option["--start-ms"], option["--rate"]) == (
        str(config.seed), str(config.start_ms), "100.0")
    assert float(option["--duplicate-ratio"]) == config.duplicate_ratio > 0
    assert production.expected(WINDOW, DELAY)


def test_two_productions_differ_in_seed_and_not_in_shape() -> None:
    a, b = (new_production(RELEASE, 10, []) for _ in range(2))
    assert isinstance(a, Production) and a.config.metrics == b.config.metrics == 40
