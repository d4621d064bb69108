"""Windows at the edges, with real Kafka, Spark and Redis: late events are dropped and counted exactly as
the oracle predicts, and heartbeats close the last window of a quiet stream without new events."""

from __future__ import annotations

import json

import pytest

from sparkwire_harness.verify import compare, expected_results, oracle_input, parse_event, read_produced

from .conftest import DELAY_MS, WINDOW_MS, Pipeline, wait_exit
from .test_exactly_once import scrape

pytestmark = pytest.mark.slow

TRIGGER_MS = 300  # conftest's --trigger-ms
HEARTBEAT_MS = 200
# Late events are this far behind the newest one: far beyond the delay plus the event time that the
# couple of micro-batches by which Spark's late-row watermark trails can span (300 records a batch at
# 200 events/s is 1.5 s), so Spark drops every one of them whatever its batch boundaries.
LATE_BY_MS = 10_000
LATE_MARGIN_MS = 5_000


def test_late_events_are_dropped_counted_and_predicted_by_the_oracle(pipeline: Pipeline) -> None:
    pipeline.produce(3_000, duplicate_ratio=0.02, max_disorder_ms=200, late_ratio=0.03, late_by_ms=LATE_BY_MS)
    outcome = pipeline.outcome(LATE_MARGIN_MS)
    produced = read_produced(pipeline.events_file)
    late = [r.value for r in produced if r.kind == "late"]
    duplicates = sum(1 for r in produced if r.kind == "duplicate")
    assert len(late) > 20 and len(outcome.results) > 40
    # The oracle finds exactly the producer's late events from timestamps alone.
    assert sorted(outcome.late_events) == sorted(e.event_id for e in map(parse_event, late) if e is not None)

    run = pipeline.start()
    pipeline.wait_for_seq(len(outcome.results))
    meta = pipeline.wait_until_idle()
    metrics = scrape(pipeline.metrics_port)
    run.stop(timeout=60)

    report = compare(outcome.results, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary()
    assert meta.last_seq == len(outcome.results)
    # A late event Spark had kept would have reopened a closed window: a repeated processingId.
    assert meta.counters.get("duplicates_suppressed", 0) == 0
    assert metrics["sparkwire_aggregator_late_rows_dropped_total"] == len(late)
    assert metrics["sparkwire_aggregator_duplicate_events_dropped_total"] == duplicates
    assert wait_exit(run, 5) == 0


def test_heartbeats_close_the_last_window_of_a_quiet_stream(pipeline: Pipeline) -> None:
    run = pipeline.start()
    # Its first (empty) batch takes seconds while Spark warms up: measure a running query, not its start.
    run.wait_ready(lambda: len(batch_durations_ms(run.log_path.read_text())) >= 1, timeout=180)

    # Real time: 3 s of events, then 6 s of heartbeats only (a quiet stream).
    pipeline.produce(150, "--realtime", rate=50, heartbeat_ms=HEARTBEAT_MS, idle_ms=6000, start_ms=0,
                     max_disorder_ms=100)
    produced = pipeline.produced()
    events = [e for e in (parse_event(r.value) for r in produced) if e is not None]
    last_event_ms = max(e.timestamp for e in events)
    expected = pipeline.expected()
    last_window = max(expected.values(), key=lambda r: r.window_end)
    assert last_window.window_start <= last_event_ms < last_window.window_end, "the oracle closed every window"
    # Without the heartbeats the watermark stays behind the last event and its window never closes.
    without = expected_results(oracle_input(r for r in produced if r.kind != "heartbeat"), WINDOW_MS, DELAY_MS)
    assert last_window.processing_id not in without

    pipeline.wait_for_seq(len(expected), timeout=60)
    run.stop(timeout=60)
    entries = list(pipeline.reader.iter_all())
    report = compare(expected, entries)
    assert report.ok, report.summary()

    [entry] = [e for e in entries if e.processing_id == last_window.processing_id]
    # Event time is the producer's wall clock (--start-ms 0), commit time Redis's: same host. Once the
    # window's end is delay old, a heartbeat (every 200 ms) carries event time past it; it waits for the
    # batch in progress, the next batch reads it and moves the watermark, and the one after emits the
    # window. Batches here take longer than the trigger (2 shared CPUs), so the budget counts their real
    # length rather than trigger intervals; the first batch (Spark warming up) is not one of them.
    slowest = max(batch_durations_ms(run.log_path.read_text())[1:])
    budget = DELAY_MS + HEARTBEAT_MS + TRIGGER_MS + 3 * slowest
    after_end = entry.commit_ms - last_window.window_end
    print(f"last window committed {after_end} ms after its end, {entry.commit_ms - last_event_ms} ms after the "
          f"last event; budget {budget} ms after its end (slowest batch {slowest} ms)")
    assert after_end <= budget


def batch_durations_ms(log: str) -> list[int]:
    """Duration of each aggregation batch, from the aggregator's query-progress log lines."""
    durations = []
    for line in log.splitlines():
        start = line.find("{")
        if '"query_progress"' in line and '"sparkwire-aggregate"' in line and start >= 0:
            durations.append(int(json.loads(line[start:])["durationMs"]))
    return durations
