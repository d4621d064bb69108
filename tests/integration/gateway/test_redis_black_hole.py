"""The gateway's link to Redis goes silent (a black hole: data dropped, nothing closed, as when a Redis pod's
address stops answering instead of refusing): its clients are closed with 4503 within the command timeout
and its retries, and resume once the link answers again, instead of waiting for TCP to give up (~15 min).

The kind suite once saw this: a Redis pod deleted, one gateway's clients got neither entries nor pings nor
a close for 7 minutes, the pod unready (a connect to a vanished address waits out TCP's SYN retries, ~2 min
a try, without a connect timeout). Here, without the gateway's socket timeouts, the close came after 20 s
(some other wait of redis-py's gave up first), which the bound below fails: with them, ~4 s."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import redis as redis_lib
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer, http_status

TIMEOUT_MS = 1000


async def close_code_of_a_new_client(url: str, within_s: float) -> tuple[int | None, list[str], float]:
    """A fresh client (it needs the stream's meta and snapshot from Redis): how its connection ended."""
    started = time.monotonic()
    frames: list[str] = []
    async with connect(url, open_timeout=5) as ws:
        await ws.send(json.dumps({"type": "hello", "v": 1}))
        try:
            async with asyncio.timeout(within_s):
                while True:
                    frames.append(str(await ws.recv()))
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else None), frames, time.monotonic() - started
        except TimeoutError:
            return None, frames, time.monotonic() - started


def test_a_silent_redis_link_closes_clients_with_4503_and_they_resume_once_it_answers(
    redis_server: RedisServer, redis: redis_lib.Redis, toxiproxy: Toxiproxy, unique_name: str, tmp_path: Path
) -> None:
    Committer(redis, unique_name).commit(4)
    port = toxiproxy.create_proxy("redis", redis_server.port)
    gateway = GatewayProcess(tmp_path, f"redis://127.0.0.1:{port}/0", [unique_name],
                             "--redis-timeout-ms", str(TIMEOUT_MS)).start()
    try:
        hole = toxiproxy.add_fault("redis", "hole", "blackhole", {})
        code, frames, seconds = asyncio.run(close_code_of_a_new_client(gateway.ws(unique_name), within_s=30))
        assert code == 4503, (code, frames, seconds)
        assert seconds < 10, f"closed after {seconds:.1f} s: not by the {TIMEOUT_MS} ms timeout and its 3 retries"
        assert frames == [], frames  # a close the server's store caused: no error frame
        assert http_status(f"{gateway.http}/readyz") == 503
        toxiproxy.remove("redis", hole)

        deadline = time.monotonic() + 30
        while http_status(f"{gateway.http}/readyz") != 200:
            assert time.monotonic() < deadline, "the pod did not get ready again once Redis answered"
            time.sleep(0.2)
        code, frames, _ = asyncio.run(close_code_of_a_new_client(gateway.ws(unique_name), within_s=2))
        assert code is None and [json.loads(f)["type"] for f in frames][:2] == ["welcome", "snapshot"], frames
    finally:
        gateway.stop()
    print(f"a silent Redis link: the client was closed with 4503 after {seconds:.1f} s "
          f"({TIMEOUT_MS} ms per try, 4 tries)")
