"""The gateway's replication poll with a fake client: the gauges, primary changes, and failures that never end
the task and warn once per streak."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest
import redis.asyncio as redis_async
from prometheus_client import REGISTRY
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from sparkwire.gateway.store.replication_watch import ReplicationWatch
from sparkwire.replaylog.replication import ReplicationStatus, read_replication_async


def sample(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


def info(replid: str, *offsets: int, primary_offset: int = 1000, lag: int = 0) -> dict[str, Any]:
    reply: dict[str, Any] = {"role": "master", "connected_slaves": len(offsets), "master_replid": replid,
                             "master_repl_offset": primary_offset}
    for i, offset in enumerate(offsets):
        reply[f"slave{i}"] = {"ip": "127.0.0.1", "port": 7000 + i, "state": "online", "offset": offset, "lag": lag}
    return reply


class FakeRedis:
    """Answers INFO replication with the next reply in ``replies``; an exception in it is raised."""

    def __init__(self, *replies: dict[str, Any] | Exception) -> None:
        self.replies = list(replies)
        self.calls = 0

    async def info(self, section: str) -> dict[str, Any]:
        assert section == "replication"
        self.calls += 1
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply


def watch_of(fake: FakeRedis, **kwargs: float) -> ReplicationWatch:
    return ReplicationWatch(lambda: read_replication_async(cast("redis_async.Redis", fake)), **kwargs)


def test_the_gauges_show_the_primary_s_replicas_and_their_largest_lag() -> None:
    watch = watch_of(FakeRedis(info("a" * 40, 900, 400, lag=1)))
    asyncio.run(watch.poll())
    assert sample("sparkwire_redis_replicas_connected") == 2
    assert sample("sparkwire_redis_replication_lag_bytes") == 600
    assert sample("sparkwire_redis_replication_lag_seconds") == 1
    watch.observe(ReplicationStatus("master", "a" * 40, 0, ()))  # a lone Redis: zeros, the truth
    assert sample("sparkwire_redis_replicas_connected") == 0
    assert sample("sparkwire_redis_replication_lag_bytes") == 0


def test_a_new_replication_id_counts_one_primary_change_and_the_first_one_none() -> None:
    before = sample("sparkwire_redis_primary_changes_total")
    fake = FakeRedis(info("a" * 40, 1000), info("a" * 40, 1000), info("b" * 40, 1000), info("b" * 40))
    watch = watch_of(fake)
    for _ in range(4):
        asyncio.run(watch.poll())
    assert sample("sparkwire_redis_primary_changes_total") - before == 1


def test_failures_never_end_the_task_and_warn_once_per_streak(caplog: pytest.LogCaptureFixture) -> None:
    errors_before = sample("sparkwire_gateway_redis_errors_total", operation="info_replication")
    changes_before = sample("sparkwire_redis_primary_changes_total")
    fake = FakeRedis(info("a" * 40, 1000), RedisConnectionError("gone"), RedisConnectionError("gone"),
                     ResponseError("NOPERM this user has no permissions to run the 'info' command"),
                     ValueError("odd reply"), info("b" * 40, 1000), RedisConnectionError("gone again"),
                     info("b" * 40, 1000))
    watch = watch_of(fake, interval_s=0.001)

    async def run_a_while() -> None:
        task = asyncio.create_task(watch.run())
        while fake.calls < 8:
            await asyncio.sleep(0.001)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.INFO, logger="sparkwire.gateway.store.replication_watch"):
        asyncio.run(run_a_while())
    warnings = [r for r in caplog.records if r.message == "redis replication status unavailable"]
    assert len(warnings) == 2  # two streaks: four failures, then one
    assert sample("sparkwire_gateway_redis_errors_total", operation="info_replication") - errors_before == 5
    assert sample("sparkwire_redis_primary_changes_total") - changes_before == 1  # across the failures


def test_a_poll_that_hangs_times_out() -> None:
    class Hanging:
        async def info(self, section: str) -> dict[str, Any]:
            await asyncio.sleep(10)
            raise AssertionError("not reached")

    watch = ReplicationWatch(lambda: read_replication_async(cast("redis_async.Redis", Hanging())), timeout_s=0.01)
    with pytest.raises(TimeoutError):
        asyncio.run(watch.poll())
