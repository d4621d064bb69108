"""The Spark job's writer reports its replication events as metrics, and how many replicas it waits for."""

from __future__ import annotations

from prometheus_client import REGISTRY

from sparkwire.spark import metrics
from sparkwire.spark.delivery import Target


def sample(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    return 0.0 if value is None else value


def test_a_job_s_writer_counts_writes_not_replicated_and_batches_published_again() -> None:
    writer = Target(redis_url="redis://127.0.0.1:1/0", replicas=2).writer("s")  # connects lazily: never here
    assert sample("sparkwire_aggregator_redis_replicas_required") == 2
    assert isinstance(writer.events, metrics.WriterMetrics)
    not_replicated = sample("sparkwire_aggregator_not_replicated_total")
    republished = sample("sparkwire_aggregator_batches_republished_total")

    writer.events.not_replicated(1, 2)
    writer.events.republished("q", 7)

    assert sample("sparkwire_aggregator_not_replicated_total") == not_replicated + 1
    assert sample("sparkwire_aggregator_batches_republished_total") == republished + 1
    Target(redis_url="redis://127.0.0.1:1/0").writer("s")
    assert sample("sparkwire_aggregator_redis_replicas_required") == 0
