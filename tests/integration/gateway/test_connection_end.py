"""A connection ends whole: a bad frame while a long history replays gets its error frame and close code,
and no task the connection owns outlives it (issue 12: in about half the tries the sender swallowed its
cancel, streamed the rest of the history, and the connection never closed)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator

import pytest
import redis as redis_lib
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

HISTORY = 10_000
PAGE_SIZE = 10  # many small history reads, so a bad frame lands while one is in flight
TRIES = 16  # the old code got stuck in about half the tries: all 16 passing by chance is ~1 in 65,000
BAD_FRAMES = [
    "garbage",
    json.dumps({"type": "hello", "v": 1}),
    json.dumps({"type": "ack", "seq": 10**9, "duplicates": 0, "gaps": 0}),
]


@pytest.fixture(scope="module")
def replaying(redis_server: RedisServer,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, GatewayProcess]]:
    stream = f"longhistory{time.monotonic_ns() % 10**9}"
    client: redis_lib.Redis = redis_server.client(decode_responses=False)
    Committer(client, stream, per_batch=100).commit(HISTORY // 100)
    client.close()
    gateway = GatewayProcess(tmp_path_factory.mktemp("connection-end"), redis_server.url, [stream],
                             "--page-size", str(PAGE_SIZE), "--insecure-no-auth").start()
    try:
        yield stream, gateway
    finally:
        gateway.stop()


async def bad_frame_after_welcome(url: str, delay: float, bad: str) -> tuple[int | None, list[str], int]:
    """The close code, the error frames' codes, and how many entries arrived before the close."""
    errors: list[str] = []
    entries = 0
    async with connect(url, open_timeout=5, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "v": 1, "cursor": {"epoch": "", "seq": 0}}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        await asyncio.sleep(delay)
        await ws.send(bad)
        try:
            async with asyncio.timeout(5):
                while True:
                    frame = json.loads(await ws.recv())
                    if frame["type"] == "error":
                        errors.append(frame["code"])
                    elif frame["type"] == "entries":
                        entries += len(frame["entries"])
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else None), errors, entries
        except TimeoutError:
            return None, errors, entries
    return None, errors, entries


def test_bad_frame_during_history_replay_closes_the_connection(replaying: tuple[str, GatewayProcess]) -> None:
    stream, gateway = replaying
    rng = random.Random(12)
    for attempt in range(TRIES):
        bad = BAD_FRAMES[attempt % len(BAD_FRAMES)]
        code, errors, entries = asyncio.run(bad_frame_after_welcome(gateway.ws(stream), rng.uniform(0, 0.05), bad))
        assert (code, errors) == (4400, [4400]), (
            f"try {attempt}: {bad!r} answered with close {code}, error frames {errors}, after {entries} entries"
            f" (a connection that streams its whole history of {HISTORY} and never closes is the old bug)")

    # Every handler returned: the open-connection gauge is back to zero, and SIGTERM has nobody to drain.
    deadline = time.monotonic() + 5
    while gateway.metric("sparkwire_gateway_connections") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gateway.metric("sparkwire_gateway_connections") == 0
    started = time.monotonic()
    gateway.stop()
    assert time.monotonic() - started < 3, "shutdown waited for connection tasks that should have ended"
    assert "timeout graceful shutdown exceeded" not in gateway.process.log_path.read_text()
