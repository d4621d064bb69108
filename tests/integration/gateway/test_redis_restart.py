"""Fresh clients right after Redis restarted (data kept) are served without a ``4503``: the gateway's pooled
Redis connections died with the old server, and the first command on one is retried on a new connection
instead of failing the client's hello (issue 18's note: "the gateway's Redis pool retries nothing")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sparkwire.client import ReconnectPolicy, StreamClient
from sparkwire.replaylog import ReplayLogWriter
from sparkwire.replaylog.model import Record
from sparkwire_harness.stack import GatewayProcess, RedisServer

CLIENTS = 12


async def fresh_clients(url: str) -> list[dict[int, int]]:
    """``CLIENTS`` fresh clients at once, each until its snapshot is applied; their closes."""
    clients = [StreamClient(url, reconnect=ReconnectPolicy(initial_delay_s=0.2, max_delay_s=0.5))
               for _ in range(CLIENTS)]
    tasks = [asyncio.create_task(client.run()) for client in clients]
    for client in clients:
        await client.wait_until(lambda client=client: client.cursor is not None, timeout=30)
    for client, task in zip(clients, tasks, strict=True):
        await client.stop()
        await task
    return [client.stats().closes for client in clients]


def test_fresh_clients_right_after_a_redis_restart_get_their_snapshot_without_a_4503(
    tmp_path: Path, unique_name: str
) -> None:
    server = RedisServer(tmp_path / "redis")
    (tmp_path / "redis").mkdir()
    server.start()
    gateway = None
    try:
        writer = ReplayLogWriter(server.client(), unique_name, retention=10_000)
        writer.commit_batch("state", 0, [Record(f"id-{n}", f"key-{n}", json.dumps({"n": n})) for n in range(200)])
        gateway = GatewayProcess(tmp_path, server.url, [unique_name]).start()
        url = f"ws://127.0.0.1:{gateway.port}/ws?stream={unique_name}"
        before = asyncio.run(fresh_clients(url))  # several pooled connections now open
        assert all(4503 not in closes for closes in before), before
        server.restart()
        after = asyncio.run(fresh_clients(url))
        assert [closes for closes in after if closes.get(4503)] == [], gateway.process.log_tail()
    finally:
        if gateway is not None:
            gateway.stop()
        server.stop()
