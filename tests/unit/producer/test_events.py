from __future__ import annotations

import itertools
import json

import pytest

from sparkwire.producer.events import MALFORMED_TEMPLATES, GeneratorConfig, generate
from sparkwire_harness.verify import parse_event


def test_the_same_seed_gives_the_same_records() -> None:
    config = GeneratorConfig(seed=5, duplicate_ratio=0.2, malformed_ratio=0.2, max_disorder_ms=30)
    assert list(generate(config, 300)) == list(generate(config, 300))
    assert list(generate(config, 300)) != list(generate(GeneratorConfig(seed=6), 300))


def test_duplicates_repeat_an_event_and_malformed_records_are_not_events() -> None:
    records = list(generate(GeneratorConfig(duplicate_ratio=0.3, malformed_ratio=0.3), 500))
    kinds = [r.kind for r in records]
    assert kinds.count("event") == 500
    assert kinds.count("duplicate") > 0 and kinds.count("malformed") > 0
    for previous, record in itertools.pairwise(records):
        if record.kind == "duplicate":
            assert record.value == previous.value
    assert all(parse_event(r.value) is None for r in records if r.kind == "malformed")


def test_event_time_follows_the_rate_within_the_disorder_bound() -> None:
    config = GeneratorConfig(rate=100, start_ms=10_000, max_disorder_ms=40)
    events = [json.loads(r.value) for r in generate(config, 200)]
    for i, event in enumerate(events):
        assert 10_000 + i * 10 - 40 <= event["timestamp"] <= 10_000 + i * 10


@pytest.mark.parametrize("template", MALFORMED_TEMPLATES)
def test_every_malformed_template_is_rejected_by_the_checker(template: str) -> None:
    assert parse_event(template) is None


def test_bad_ratios_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate_ratio"):
        GeneratorConfig(duplicate_ratio=1.5)


def test_late_events_are_late_by_the_configured_amount_once_that_much_time_has_passed() -> None:
    config = GeneratorConfig(rate=100, start_ms=0, late_ratio=0.2, late_by_ms=1_000)
    records = list(generate(config, 500))
    late = [(r.due_ms, json.loads(r.value)) for r in records if r.kind == "late"]
    assert len(late) > 30
    assert all(due >= 1_000 and event["timestamp"] == due - 1_000 for due, event in late)
    assert all(parse_event(json.dumps(event)) is not None for _, event in late)
    # late events get ids of their own, and asking for none leaves a seed's other records as they were
    assert len({event["eventId"] for _, event in late} | {json.loads(r.value)["eventId"] for r in records
                                                         if r.kind == "event"}) == 500 + len(late)


def test_the_same_seed_without_late_events_or_heartbeats_gives_the_same_events() -> None:
    plain = [r for r in generate(GeneratorConfig(seed=3), 200)]
    beating = [r for r in generate(GeneratorConfig(seed=3, heartbeat_ms=250, idle_ms=1_000), 200)
               if r.kind != "heartbeat"]
    assert plain == beating


def test_heartbeats_carry_the_event_time_clock_until_idle_ends() -> None:
    config = GeneratorConfig(rate=10, start_ms=5_000, heartbeat_ms=500, idle_ms=2_000)
    records = list(generate(config, 10))  # events due 0..900 ms
    beats = [(r.due_ms, json.loads(r.value)) for r in records if r.kind == "heartbeat"]
    assert [due for due, _ in beats] == [0, 500, 1_000, 1_500, 2_000, 2_500]
    assert all(document == {"type": "heartbeat", "timestamp": 5_000 + due} for due, document in beats)
    assert all(parse_event(r.value) is None for r in records if r.kind == "heartbeat")
