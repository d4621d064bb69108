"""The Python client's ``filter=`` (issue 43) against real gateway processes and Redis: a scoped token and a
filter on a nullable field, one pod stopped while entries are committed, the client resumed on another pod
from its covered position; what it applied is checked against the log read here and filtered independently."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
import redis as redis_lib

from sparkwire.client import ReconnectPolicy, StreamClient
from sparkwire.replaylog import ReplayLogReader, ReplayLogWriter
from sparkwire.replaylog.model import Record
from sparkwire_harness.stack import RedisServer

from .conftest import SECRET, GatewayProcess

FILTER: dict[str, object] = {"n": {"ge": 10}, "closedAt": {"isNull": True}}


def row(n: int) -> dict[str, object]:
    """A tenant in turn; ``closedAt`` null, left out, or set: only the first two are absent."""
    data: dict[str, object] = {"n": n, "tenant": ("acme", "globex")[n % 2]}
    if n % 3 == 1:
        data["closedAt"] = None
    elif n % 3 == 2:
        data["closedAt"] = 1_700_000_000 + n
    return data


def admitted(redis: redis_lib.Redis, stream: str, after: int) -> list[int]:
    """The seqs after ``after`` that the scope (acme) AND the filter admit, from the log read here."""
    seqs = []
    for entry in ReplayLogReader(redis, stream).iter_all():
        data = json.loads(entry.data)
        if entry.seq > after and data["tenant"] == "acme" and data["n"] >= 10 and data.get("closedAt") is None:
            seqs.append(entry.seq)
    return seqs


def token(stream: str) -> str:
    now = int(time.time())
    return jwt.encode({"sub": "tenant-user", "streams": [stream], "iat": now, "exp": now + 600,
                       "scope": {stream: {"tenant": "acme"}}}, SECRET, algorithm="HS256")


@pytest.fixture
def pods(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    started = [GatewayProcess(tmp_path / name, redis_server.url, [unique_name], "--allow-missing-origin",
                              auth_secret=SECRET).start() for name in ("a", "b")]
    yield started
    for pod in started:
        pod.process.stop()


class Writer:
    def __init__(self, redis: redis_lib.Redis, stream: str) -> None:
        self.writer = ReplayLogWriter(redis, stream, retention=100_000)
        self.next, self.batch = 0, 0

    def commit(self, count: int, tenant: str | None = None) -> None:
        rows = [{**row(n), **({"tenant": tenant} if tenant else {})} for n in range(self.next, self.next + count)]
        records = [Record(f"r{n}", f"k{n % 10}", json.dumps(data)) for n, data in enumerate(rows, self.next)]
        self.writer.commit_batch("filtered", self.batch, records)
        self.next += count
        self.batch += 1


def test_a_filtered_python_client_resumes_on_another_pod_and_applies_its_view_exactly_once(
    pods: list[GatewayProcess], redis: redis_lib.Redis, unique_name: str
) -> None:
    first, second = pods
    writer = Writer(redis, unique_name)
    writer.commit(30)
    attempts: list[int] = []

    def open_socket() -> socket.socket:  # the first connection to pod a, every later one to pod b
        pod = first if not attempts else second
        attempts.append(pod.port)
        return socket.create_connection(("127.0.0.1", pod.port), timeout=5)

    async def run() -> StreamClient:
        client = StreamClient(first.ws(unique_name), token=token(unique_name), filter=FILTER, keep_applied=True,
                              open_socket=open_socket, reconnect=ReconnectPolicy(0.05, 0.2))
        runner = asyncio.create_task(client.run())
        await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == 30, timeout=15)
        await asyncio.to_thread(writer.commit, 20)
        await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == 50, timeout=15)
        stopping = asyncio.create_task(asyncio.to_thread(first.stop))  # drains: its clients go to pod b
        await asyncio.to_thread(writer.commit, 20)
        await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == 70, timeout=30)
        await stopping
        # Outside the scope, all of them: pod b's position frames move the cursor past them (a resume would
        # not read them again), with nothing applied.
        await asyncio.to_thread(writer.commit, 5, "globex")
        await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == 75, timeout=15)
        await client.stop()
        await runner  # wait_until raised the TerminalClose that ended it, if one did
        return client

    client = asyncio.run(run())
    stats = client.stats()
    assert stats.terminal is None and stats.gaps == 0
    assert stats.resets == {"no_position": 1} and stats.reconnects >= 1  # one snapshot, then resumes
    assert second.port in attempts
    assert [seq for seq, _ in client.applied] == admitted(redis, unique_name, 30)
    assert client.cursor is not None and client.cursor.view is not None and client.cursor.seq == 75
    assert client.state and all(item.data["tenant"] == "acme" for item in client.state.values())  # type: ignore[index]
