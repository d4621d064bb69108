"""Pings posted to an SSE connection in one body are each answered, as a WebSocket answers pings written
at once (issue 39): the pongs used to be sent by a task each, at most 16 in flight, so the 17th ping of one
body closed the client with 4429 slow_consumer."""

from __future__ import annotations

import asyncio

from .conftest import Committer, GatewayProcess
from .sse_client import SseConversation, sse_connection, until

PINGS = 2_000


def test_two_thousand_pings_in_one_post_get_two_thousand_pongs_and_no_close(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(1)

    async def run() -> SseConversation:
        async with sse_connection(gateway.http, unique_name, {}) as (conv, task):
            await until(lambda: any(frame["type"] == "snapshot" for frame in conv.frames), task)
            assert await conv.post(*({"type": "ping", "t": t} for t in range(PINGS))) == 204
            await until(lambda: sum(frame["type"] == "pong" for frame in conv.frames) == PINGS, task, timeout=20)
            assert await conv.post({"type": "ping", "t": PINGS}) == 204  # and the connection goes on
            await until(lambda: {"type": "pong", "t": PINGS} in conv.frames, task)
            return conv

    conv = asyncio.run(run())
    assert conv.close is None
    assert [frame["t"] for frame in conv.frames if frame["type"] == "pong"] == list(range(PINGS + 1))
