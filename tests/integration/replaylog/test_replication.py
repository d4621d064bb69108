"""ReplicationStatus read from real Redis processes: a replicated one (1 primary, 2 replicas, 3 sentinels)
through its Sentinel URL, with the sync and the asyncio client, and a lone Redis."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sparkwire.replaylog.redis_url import connect_async
from sparkwire.replaylog.replication import ReplicationStatus, read_replication, read_replication_async
from sparkwire_harness.stack import RedisServer, ReplicatedRedis

pytestmark = pytest.mark.slow


async def _read_async(url: str) -> ReplicationStatus:
    client = connect_async(url, max_connections=2)
    try:
        return await read_replication_async(client)
    finally:
        await client.aclose()


def test_the_primary_of_a_replicated_redis_reports_its_replicas(tmp_path: Path) -> None:
    with ReplicatedRedis(tmp_path) as replicated:
        client = replicated.client()
        for i in range(200):
            client.set(f"k{i}", "x" * 100)
        assert client.wait(2, 5_000) == 2  # both replicas hold every write: their acks caught up
        status = read_replication(client)
        with replicated.primary().client(decode_responses=True) as direct:
            info = direct.info("replication")

        assert (status.role, status.master_replid) == ("master", info["master_replid"])
        assert status.replicas_connected == 2
        assert {replica.address for replica in status.online} == {f"127.0.0.1:{node.port}"
                                                                  for node in replicated.replicas()}
        assert status.master_repl_offset >= 200 * 100
        assert 0 <= status.lag_bytes < 200 * 100 and status.lag_seconds <= 2
        assert asyncio.run(_read_async(replicated.url)).master_replid == status.master_replid

        replicated.replicas()[0].stop()
        assert read_replication(client).replicas_connected == 1  # a replica that closed its link is gone at once
        client.close()


def test_a_lone_redis_has_no_replica(redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        status = read_replication(client)
    assert (status.role, status.replicas_connected, status.lag_bytes, status.lag_seconds) == ("master", 0, 0, 0)
    assert len(status.master_replid) == 40
