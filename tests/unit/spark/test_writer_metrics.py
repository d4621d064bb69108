"""The Spark job's writer reports its replication events as metrics, and how many replicas it waits for."""

from __future__ import annotations

import logging

import pytest
import redis
from prometheus_client import REGISTRY

from sparkwire.replaylog import ReplayLogWriter
from sparkwire.spark import metrics
from sparkwire.spark.delivery.deliver import Target


def sample(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    return 0.0 if value is None else value


def test_a_job_s_writer_counts_writes_not_replicated_and_batches_published_again() -> None:
    writer = Target(redis_url="redis://127.0.0.1:1/0", replicas=2).writer("s")  # connects lazily: never here
    assert sample("sparkwire_job_redis_replicas_required") == 2
    assert isinstance(writer.events, metrics.WriterMetrics)
    not_replicated = sample("sparkwire_job_not_replicated_total")
    republished = sample("sparkwire_job_batches_republished_total")

    writer.events.not_replicated(1, 2)
    writer.events.republished("q", 7)

    assert sample("sparkwire_job_not_replicated_total") == not_replicated + 1
    assert sample("sparkwire_job_batches_republished_total") == republished + 1
    Target(redis_url="redis://127.0.0.1:1/0").writer("s")
    assert sample("sparkwire_job_redis_replicas_required") == 0


def test_a_job_s_writer_counts_and_logs_the_calls_it_sends_again(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing listens on port 1: every try is refused, retried for the writer's window, then raised."""
    writer = Target(redis_url="redis://127.0.0.1:1/0").writer("s")
    writer_with_short_window = ReplayLogWriter(writer.client, "s", retry_for_seconds=0.5, events=writer.events)
    retries = sample("sparkwire_job_redis_retries_total")

    with caplog.at_level(logging.WARNING), pytest.raises(redis.ConnectionError):
        writer_with_short_window.stream_epoch()

    counted = sample("sparkwire_job_redis_retries_total") - retries
    logged = [r for r in caplog.records if getattr(r, "fields", {}).get("event") == "redis_retry"]
    assert counted >= 2 and len(logged) == counted
    assert [r.fields["attempt"] for r in logged] == list(range(1, len(logged) + 1))  # type: ignore[attr-defined]
