"""A job file's command line: the placement options (what the Helm chart sets as SPARKWIRE_* variables)
override the job's own settings, and only those given."""

from __future__ import annotations

import argparse

import pytest

from sparkwire.spark import Job, KafkaSource, SourceQuery, StreamSpec, Target
from sparkwire.spark.runtime.main import add_placement_arguments, placed

JOB = Job(SourceQuery(KafkaSource("kafka:9092", "orders"), events=lambda df: df, event_time="t",
                      watermark_delay_ms=1000, query=lambda df: df),
          StreamSpec(stream="orders", key="region", id_from=("region",)),
          Target(redis_url="redis://r:6379/0", checkpoint="/ck"))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_placement_arguments(parser)
    return parser.parse_args(argv)


def test_nothing_given_keeps_the_job() -> None:
    assert placed(JOB, parse([])) == JOB


def test_the_environment_places_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKWIRE_REDIS_URL", "redis://other:6379/1")
    monkeypatch.setenv("SPARKWIRE_CHECKPOINT", "/var/lib/ck")
    job = placed(JOB, parse(["--bootstrap-servers", "k2:9092", "--stream", "orders-eu"]))
    assert (job.target.redis_url, job.target.checkpoint) == ("redis://other:6379/1", "/var/lib/ck")
    assert (job.query.source.bootstrap_servers, job.query.source.topic) == ("k2:9092", "orders")
    assert job.spec.stream == "orders-eu" and job.spec.key == "region"


def test_a_job_is_found_by_module_and_name() -> None:
    from sparkwire.spark.runtime.main import load_job

    assert load_job("sparkwire.examples.orders.job:job_from_environment").spec.stream == "orders"
    module = "sparkwire.examples.orders.job"
    for bad in (module, f"{module}:ORDER", f"{module}:nope"):
        with pytest.raises(SystemExit, match="--job"):
            load_job(bad)
