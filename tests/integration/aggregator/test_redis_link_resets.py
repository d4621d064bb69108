"""The real aggregator writing to Redis through a proxy that resets every connection (RST) for a few seconds,
three times mid-run: the sink retries in process (the commit script makes a resent chunk a no-op), so a blip
costs no driver restart, and the log ends exactly as the independent oracle says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import KafkaBroker, RedisServer
from sparkwire_harness.verify import compare

from .conftest import Pipeline

pytestmark = pytest.mark.slow

RESET_SECONDS = 4.0  # the longest blip the sink rides out in process (issue: "a <= 5 s blip")


def test_connection_resets_on_the_redis_link_cost_no_driver_restart(
    redis_server: RedisServer, kafka_broker: KafkaBroker, toxiproxy: Toxiproxy, tmp_path: Path, unique_name: str
) -> None:
    kafka_broker.create_topic(f"{unique_name}-raw", partitions=2)
    kafka_broker.create_topic(f"{unique_name}-dlq", partitions=1)
    port = toxiproxy.create_proxy("redis", redis_server.port)
    pipeline = Pipeline(unique_name, tmp_path / "pipeline", kafka_broker, redis_server, max_offsets_per_trigger=150,
                        aggregator_redis_url=f"redis://127.0.0.1:{port}/0")
    pipeline.workdir.mkdir()
    # Three parts of 1,000 events, one before the aggregator starts and one after each of the first two
    # blips, each blip once the aggregator writes the part before it: every blip meets writes to retry.
    pipeline.produce(1_000, duplicate_ratio=0.03, max_disorder_ms=200)
    blips: list[tuple[int, int]] = []  # (seq when the resets began, seq when they ended)
    try:
        driver = pipeline.start()
        at_seq = 5
        for n in range(3):
            before = pipeline.wait_for_seq(at_seq).last_seq
            toxics = toxiproxy.add_fault("redis", f"reset-{n}", "reset", {})
            time.sleep(RESET_SECONDS)
            toxiproxy.remove("redis", toxics)
            blips.append((before, pipeline.reader.meta().last_seq))
            assert driver.alive, f"the driver exited after blip {n}:\n{driver.log_tail(60)}"
            if n < 2:
                at_seq = blips[-1][1] + 1
                pipeline.produce(1_000, duplicate_ratio=0.03, max_disorder_ms=200)
        expected = pipeline.expected()
        pipeline.wait_for_seq(len(expected), timeout=240)
        meta = pipeline.wait_until_idle()
        survived = driver.alive
    finally:
        for run in pipeline.runs:
            if run.alive:
                run.stop(timeout=30)

    assert survived and len(pipeline.runs) == 1, driver.log_tail(60)
    report = compare(expected, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary() + "\n" + driver.log_tail(60)
    assert meta.last_seq == len(expected)
    # The blips were felt, and ridden out by retries in process (the writer's, logged and counted).
    retried = driver.log_tail(5000).count('"event": "redis_retry"')
    assert retried >= 3, driver.log_tail(60)
    print(f"blips (seq before, seq after) {blips}; replay-log calls retried {retried}")
