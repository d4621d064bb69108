"""``GatewayProcess.metric()`` (``metric_value``) reads exact metric names, filters by labels, and fails on a
metric that is not there instead of reading it as 0; ``default`` only covers a declared metric without a sample."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from sparkwire_harness.stack import MetricNotFoundError, metric_value
from sparkwire_harness.stack.gateway_process import parse_selector


@pytest.fixture(scope="module")
def text() -> str:
    """Exposition as the gateway writes it (prometheus_client), with names that share prefixes."""
    registry = CollectorRegistry()
    connections = Gauge("sw_connections", "open", ["stream"], registry=registry)
    accepted = Counter("sw_connections_accepted", "accepted", ["stream", "transport"], registry=registry)
    closes = Counter("sw_closes", "closes", ["code"], registry=registry)
    Counter("sw_rewinds", "never incremented, labelled", ["stream"], registry=registry)
    Gauge("sw_lag_bytes", "unlabelled", registry=registry).set(42)
    latency = Histogram("sw_latency_seconds", "latency", buckets=(0.1,), registry=registry)
    connections.labels(stream="a").set(3)
    connections.labels(stream="b").set(0)
    accepted.labels(stream="a", transport="websocket").inc(5)
    accepted.labels(stream="a", transport="sse").inc(2)
    closes.labels(code="4408").inc(7)
    latency.observe(0.05)
    return generate_latest(registry).decode()


def test_a_name_sums_its_label_sets_and_no_other_metric(text: str) -> None:
    # sw_connections is a prefix of sw_connections_accepted_total and _created (a timestamp): not counted.
    assert metric_value(text, "sw_connections") == 3
    assert metric_value(text, "sw_connections_accepted_total") == 7
    assert metric_value(text, "sw_lag_bytes") == 42
    assert metric_value(text, "sw_latency_seconds_count") == 1


def test_labels_select_the_samples_that_carry_them(text: str) -> None:
    assert metric_value(text, 'sw_connections_accepted_total{transport="sse"}') == 2
    assert metric_value(text, 'sw_connections_accepted_total{stream="a", transport="websocket"}') == 5
    assert metric_value(text, 'sw_connections{stream="b"}') == 0  # a sample at 0 is there, not missing
    assert metric_value(text, 'sw_closes_total{code="4408"}') == 7


def test_a_metric_that_is_not_there_fails(text: str) -> None:
    with pytest.raises(MetricNotFoundError, match=r"sw_conections is not in /metrics at all.*sw_connections"):
        metric_value(text, "sw_conections")
    # Not declared at all: a default does not hide a typo or a renamed metric.
    with pytest.raises(MetricNotFoundError, match="not in /metrics at all"):
        metric_value(text, "sw_lag", default=0)
    with pytest.raises(MetricNotFoundError, match="not in /metrics at all"):
        metric_value("", "sw_lag_bytes")


def test_a_declared_metric_without_a_matching_sample_fails_unless_a_default_is_given(text: str) -> None:
    with pytest.raises(MetricNotFoundError, match=r'declares sw_closes_total but has no sample with \{code="1006"\}'):
        metric_value(text, 'sw_closes_total{code="1006"}')
    with pytest.raises(MetricNotFoundError, match="declares sw_rewinds_total"):
        metric_value(text, "sw_rewinds_total")  # labelled, never incremented: no sample yet
    assert metric_value(text, 'sw_closes_total{code="1006"}', default=0) == 0
    assert metric_value(text, "sw_rewinds_total", default=0.0) == 0.0
    assert metric_value(text, 'sw_closes_total{code="4408"}', default=0) == 7  # a default only when absent


@pytest.mark.parametrize("selector", ['sw_closes_total{code="4408"', 'sw_closes_total{code=4408}', "sw closes",
                                      'sw_closes_total{code="4408"} extra', ""])
def test_a_malformed_selector_is_refused(text: str, selector: str) -> None:
    with pytest.raises(ValueError):
        metric_value(text, selector)


def test_selectors_parse_with_escapes() -> None:
    assert parse_selector("name") == ("name", {})
    assert parse_selector('name{a="x",b="y\\"z"}') == ("name", {"a": "x", "b": 'y"z'})
    assert parse_selector('name{a="1",}') == ("name", {"a": "1"})
