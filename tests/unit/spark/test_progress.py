from __future__ import annotations

from types import SimpleNamespace

from sparkwire.spark.progress import offsets_behind


def progress(*source_metrics: dict[str, str] | None) -> SimpleNamespace:
    return SimpleNamespace(sources=[SimpleNamespace(metrics=m) for m in source_metrics])


def test_offsets_behind_is_the_largest_over_the_kafka_sources() -> None:
    assert offsets_behind(progress({"maxOffsetsBehindLatest": "12", "avgOffsetsBehindLatest": "6.0"},
                                   {"maxOffsetsBehindLatest": "40.0"})) == 40


def test_offsets_behind_is_none_until_a_source_reports_it() -> None:
    assert offsets_behind(progress({}, None)) is None
    assert offsets_behind(SimpleNamespace(sources=None)) is None
    assert offsets_behind(progress({"maxOffsetsBehindLatest": "0"})) == 0
