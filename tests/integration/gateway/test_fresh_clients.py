"""Fresh clients (a hello with no cursor, then a snapshot) stay connected while they answer pings and ack,
and their sessions record the acks they sent (issue 22).

A client frame that arrived between the hello and the end of the snapshot was queued for the
application, and uvicorn paused the socket's reading until the queue was read; the connection then
handed the queue to its frame callback but never resumed reading. No later frame of that client was
read: its pongs and acks went unseen, and one pong timeout after it connected the server closed it with
4408 although it had answered every ping. A resuming client reaches the callback in one Redis round trip
and was hardly ever hit; a fresh one spends the snapshot's read and send in that window. Here every
client sends a ``ping`` as soon as its welcome arrives (the protocol allows it any time after the
welcome), so it lands in that window: before the fix these clients were closed with 4408.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis as redis_lib
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from sparkwire.replaylog.sessions import session_key
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

from .conftest import wait_for

PING_INTERVAL_MS = 500
PONG_TIMEOUT_MS = 2000
ACK_INTERVAL_S = 0.2
# Three pong timeouts: a client whose frames go unread is closed within the first.
CONNECTED_S = 3 * PONG_TIMEOUT_MS / 1000
CLIENTS_PER_GATEWAY = 4
GATEWAY_ARGS = ("--ping-interval-ms", str(PING_INTERVAL_MS), "--pong-timeout-ms", str(PONG_TIMEOUT_MS),
                "--ack-every", "5", "--ack-interval-ms", str(int(ACK_INTERVAL_S * 1000)))


@dataclass
class FreshClient:
    """What one client did and saw."""

    session: str = ""
    snapshot_seq: int | None = None
    last_seq: int | None = None
    entries: int = 0
    acks: list[int] = field(default_factory=list)
    pongs_sent: int = 0
    errors: list[int] = field(default_factory=list)  # the codes of the error frames received
    close_code: int | None = None  # the server's, if it closed the connection first
    close_reason: str = ""


async def run_fresh_client(url: str, *, silent: bool = False) -> FreshClient:
    """A fresh client for ``CONNECTED_S``; a ``silent`` one reads but never sends a frame after its hello."""
    seen = FreshClient()
    async with connect(url, open_timeout=5, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "v": 1}))
        welcome = json.loads(await ws.recv())
        assert welcome["type"] == "welcome" and welcome["reset"] == "no_position", welcome
        seen.session = welcome["session"]
        if not silent:
            await ws.send(json.dumps({"type": "ping", "t": 1}))  # while the server reads and sends the snapshot
        try:
            await _read_and_ack(ws, seen, silent)
        except ConnectionClosed as closed:
            seen.close_code = closed.rcvd.code if closed.rcvd else None
            seen.close_reason = closed.rcvd.reason if closed.rcvd else ""
            return seen
        await _ack(ws, seen)  # the last position, then a normal close
    return seen


async def _read_and_ack(ws: ClientConnection, seen: FreshClient, silent: bool) -> None:
    deadline = time.monotonic() + CONNECTED_S
    next_ack = time.monotonic() + ACK_INTERVAL_S
    while (now := time.monotonic()) < deadline:
        try:
            async with asyncio.timeout(max(min(next_ack, deadline) - now, 0.001)):
                frame = json.loads(await ws.recv())
        except TimeoutError:
            frame = None
        if frame is not None:
            if frame["type"] == "snapshot" and not frame["more"]:
                seen.snapshot_seq = seen.last_seq = frame["seq"]
            elif frame["type"] == "entries":
                seqs = [entry["seq"] for entry in frame["entries"]]
                assert seen.last_seq is not None and seqs[0] == seen.last_seq + 1, (seen.last_seq, seqs)
                seen.last_seq, seen.entries = seqs[-1], seen.entries + len(seqs)
            elif frame["type"] == "error":
                seen.errors.append(frame["code"])
            elif frame["type"] == "ping" and not silent:
                await ws.send(json.dumps({"type": "pong", "t": frame["t"]}))
                seen.pongs_sent += 1
        if time.monotonic() >= next_ack and not silent:
            await _ack(ws, seen)
            next_ack = time.monotonic() + ACK_INTERVAL_S


async def _ack(ws: ClientConnection, seen: FreshClient) -> None:
    if seen.last_seq is not None and (not seen.acks or seen.acks[-1] != seen.last_seq):
        await ws.send(json.dumps({"type": "ack", "seq": seen.last_seq, "duplicates": 0, "gaps": 0}))
        seen.acks.append(seen.last_seq)


@pytest.fixture
def two_gateways(redis_server: RedisServer, stream_with_state: str,
                 tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    gateways = [GatewayProcess(tmp_path / f"gw{n}", redis_server.url, [stream_with_state], *GATEWAY_ARGS).start()
                for n in range(2)]
    yield gateways
    for gateway in gateways:
        gateway.stop()


def test_fresh_clients_that_ping_and_ack_are_never_closed_and_their_acks_are_recorded(
    redis: redis_lib.Redis, stream_with_state: str, two_gateways: list[GatewayProcess]
) -> None:
    committer = Committer(redis, stream_with_state, per_batch=1, interval=0.02).start()  # ~50 entries/s
    try:
        restarted = two_gateways[0]  # half the clients connect to a pod that was just restarted
        restarted.stop()
        restarted.start()  # waits for /readyz
        urls = [gateway.ws(stream_with_state) for gateway in two_gateways for _ in range(CLIENTS_PER_GATEWAY)]

        async def all_clients() -> tuple[list[FreshClient], FreshClient]:
            # One silent client beside them: the pong timeout does close a client that stops answering.
            silent = asyncio.ensure_future(run_fresh_client(urls[-1], silent=True))
            clients = list(await asyncio.gather(*(run_fresh_client(url) for url in urls)))
            return clients, await silent

        clients, silent = asyncio.run(all_clients())
    finally:
        committer.stop()

    assert (silent.close_code, silent.errors) == (4408, [4408]), silent
    for index, client in enumerate(clients):
        on = "restarted" if index < CLIENTS_PER_GATEWAY else "steady"
        assert client.close_code is None, (
            f"client {index} ({on} pod) closed with {client.close_code} {client.close_reason!r}: {client}")
        assert client.snapshot_seq is not None and client.entries > 0 and client.pongs_sent > 0, client
        assert len(client.acks) > 2, client
    for client in clients:
        # The connection's end flushes its session; the last ack sent is what the session holds.
        key = session_key(client.session, stream_with_state)
        wait_for(lambda key=key, client=client: redis.hget(key, "seq") == str(client.acks[-1]).encode(), timeout=5)
