"""A pod's ack budget on a real gateway: a client that connected while the pod was nearly empty is asked,
once others joined, to ack less often (an ``acks`` frame before its next entries), and to ack more often
again when most have left."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect

from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

pytestmark = pytest.mark.timeout(60)


async def hello(url: str) -> tuple[ClientConnection, dict[str, object]]:
    ws = await connect(url, open_timeout=5)
    await ws.send(json.dumps({"type": "hello", "v": 1}))
    welcome = json.loads(await asyncio.wait_for(ws.recv(), 5))
    assert welcome["type"] == "welcome"
    return ws, welcome


async def frames_until_entries(ws: ClientConnection) -> list[dict[str, object]]:
    """The frames up to and including the next ``entries`` (skipping the snapshot)."""
    seen: list[dict[str, object]] = []
    while not seen or seen[-1]["type"] != "entries":
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if frame["type"] != "snapshot":
            seen.append(frame)
    return seen


def test_the_first_client_is_asked_to_ack_less_when_others_join_and_more_when_they_leave(
        redis_server: RedisServer, committer: Committer, unique_name: str, tmp_path: Path) -> None:
    # A budget of 2 acks/s: 4 clients stretch the 1 s interval to 2 s (a step), 8 to 4 s (the next).
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name], "--acks-per-second", "2",
                             "--ack-interval-ms", "1000", "--ack-every", "100").start()
    try:
        async def run() -> tuple[dict[str, object], list[list[dict[str, object]]]]:
            committer.commit()
            first, welcome = await hello(gateway.ws(unique_name))
            others = [(await hello(gateway.ws(unique_name)))[0] for _ in range(7)]
            committer.commit()
            joined = await frames_until_entries(first)
            for ws in others:
                await ws.close()
            await asyncio.sleep(0.5)  # the pod sees them gone
            committer.commit()
            left = await frames_until_entries(first)
            await first.close()
            return welcome, [joined, left]

        welcome, (joined, left) = asyncio.run(run())
    finally:
        gateway.process.stop()
    assert (welcome["ackEvery"], welcome["ackIntervalMs"]) == (100, 1000)  # alone on the pod: the configured policy
    assert [frame["type"] for frame in joined] == ["acks", "entries"]
    assert (joined[0]["ackEvery"], joined[0]["ackIntervalMs"]) == (400, 4000)  # 8 clients: 4x the interval
    assert [frame["type"] for frame in left] == ["acks", "entries"]
    assert (left[0]["ackEvery"], left[0]["ackIntervalMs"]) == (100, 1000)
