"""The metrics job's options: the dead-letter query's trigger and its cap on records per batch."""

from __future__ import annotations

import argparse

from sparkwire.aggregator.job import add_arguments, dead_letter_cap


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_dead_letter_query_runs_every_ten_seconds_unless_told() -> None:
    assert parse().dead_letter_trigger_ms == 10_000
    assert parse("--dead-letter-trigger-ms", "2000").dead_letter_trigger_ms == 2_000


def test_its_cap_scales_with_the_triggers_it_spans_so_it_keeps_the_main_querys_pace() -> None:
    # 300 records per 300 ms trigger: 10 s is 34 main triggers (rounded up), so 10,200 per dead-letter batch
    assert dead_letter_cap(parse("--max-offsets-per-trigger", "300", "--trigger-ms", "300")) == 10_200
    assert dead_letter_cap(parse("--max-offsets-per-trigger", "500", "--trigger-ms", "20000")) == 500
    assert dead_letter_cap(parse()) == 0  # no cap stays no cap


def test_the_kafka_source_paces_the_batches_by_time_or_by_the_cap() -> None:
    from sparkwire.aggregator.job import paced

    assert paced(parse()) == {"minOffsetsPerTrigger": str(2**62), "maxTriggerDelay": "500ms"}
    assert paced(parse("--max-offsets-per-trigger", "5000", "--trigger-ms", "1000")) == {
        "minOffsetsPerTrigger": "5000", "maxTriggerDelay": "1000ms"}
