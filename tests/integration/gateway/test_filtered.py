"""Filtered, tenant-scoped subscriptions (issue 43) against a real gateway process (uvicorn) and Redis, the
entries committed by the real commit script: over a WebSocket and over SSE, each client checked with the
client's coverage (``ViewCoverage``) against the entries its view admits, computed here independently."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import redis as redis_lib
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from sparkwire.client.coverage import ViewCoverage
from sparkwire.protocol import ErrorFrame, Removal, ViewEntriesFrame, Welcome, parse_server_frame
from sparkwire.replaylog import ReplayLogReader, ReplayLogWriter
from sparkwire.replaylog.model import Record
from sparkwire_harness.stack import RedisServer

from .conftest import SECRET, GatewayProcess
from .sse_client import sse_connection, until

TENANTS = ("acme", "globex")
FILTER = {"n": {"ge": 10}}


def row(n: int) -> dict[str, object]:
    return {"n": n, "tenant": TENANTS[n % 2], **({"closedAt": None} if n % 3 else {})}


def expected(redis: redis_lib.Redis, stream: str, after: int, through: int) -> list[int]:
    """The seqs in (after, through] of the log (read here, independently) the scope acme AND the filter admit."""
    admitted: list[int] = []
    for entry in ReplayLogReader(redis, stream).iter_all():
        data = json.loads(entry.data)
        if after < entry.seq <= through and data["tenant"] == "acme" and data["n"] >= 10:
            admitted.append(entry.seq)
    return admitted


@pytest.fixture
def secured(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name], "--allow-missing-origin",
                             auth_secret=SECRET).start()
    yield process
    process.process.stop()


class Writer:
    def __init__(self, redis: redis_lib.Redis, stream: str) -> None:
        self.writer = ReplayLogWriter(redis, stream, retention=100_000)
        self.next = 0
        self.batch = 0

    def commit(self, count: int) -> None:
        records = [Record(f"r{n}", f"k{n % 10}", json.dumps(row(n))) for n in range(self.next, self.next + count)]
        self.writer.commit_batch("filtered", self.batch, records)
        self.next += count
        self.batch += 1


def hello(stream: str, scope: dict[str, object], **fields: Any) -> dict[str, Any]:
    now = int(time.time())
    token = jwt.encode({"sub": "tenant-user", "streams": [stream], "iat": now, "exp": now + 600, "scope": scope},
                       SECRET, algorithm="HS256")
    return {"type": "hello", "v": 1, "token": token, **fields}


def observe(frames: list[dict[str, Any]], coverage: ViewCoverage) -> list[int]:
    """The entries the filtered frames deliver, each frame checked by ``coverage`` (no gap, no repeat)."""
    seqs: list[int] = []
    for document in frames:
        frame = parse_server_frame(json.dumps(document))
        if isinstance(frame, ViewEntriesFrame):
            result = coverage.observe(frame)
            assert result.verdict == "next", (result, coverage.covered, document)
            seqs.extend(item.seq for item in result.fresh if not isinstance(item, Removal))
    return seqs


def test_a_scoped_filtered_client_over_websocket_gets_exactly_its_view(
    secured: GatewayProcess, redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = Writer(redis, unique_name)
    writer.commit(30)

    async def run() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        frames: list[dict[str, Any]] = []
        async with connect(secured.ws(unique_name), open_timeout=5) as ws:
            await ws.send(json.dumps(hello(unique_name, {unique_name: {"tenant": "acme"}}, filter=FILTER)))
            welcome = json.loads(await ws.recv())
            snapshot = json.loads(await ws.recv())
            assert snapshot["type"] == "snapshot" and snapshot["seq"] == 30
            assert {item["data"]["tenant"] for item in snapshot["items"].values()} == {"acme"}
            await asyncio.to_thread(writer.commit, 40)
            async with asyncio.timeout(15):
                while not frames or frames[-1].get("through", 0) < 70:
                    frames.append(json.loads(await ws.recv()))
            return {**welcome, "snapshotSeq": snapshot["seq"], "digest": snapshot.get("digest")}, frames

    welcome, frames = asyncio.run(run())
    assert isinstance(parse_server_frame(json.dumps({k: v for k, v in welcome.items()
                                                     if k not in ("snapshotSeq", "digest")})), Welcome)
    assert len(welcome["view"]) == 16
    assert observe(frames, ViewCoverage(30, welcome["digest"])) == expected(redis, unique_name, 30, 70)


def test_a_scoped_filtered_client_over_sse_resumes_from_its_covered_position(
    secured: GatewayProcess, redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = Writer(redis, unique_name)
    writer.commit(20)
    scope = {"*": {"tenant": "acme"}}

    async def run() -> tuple[list[int], list[int]]:
        coverage = ViewCoverage()
        async with sse_connection(secured.http, unique_name, hello(unique_name, scope, filter=FILTER,
                                  cursor={"epoch": "", "seq": 0})) as (first, task):
            await until(lambda: bool(first.frames) and first.frames[-1].get("through", 0) >= 20, task)
            welcome = first.frames[0]
        assert welcome["type"] == "welcome" and welcome["recovered"]
        before = observe(first.frames, coverage)
        await asyncio.to_thread(writer.commit, 30)
        cursor = {"epoch": welcome["epoch"], "seq": coverage.covered, "digest": coverage.digest,
                  "view": welcome["view"]}
        async with sse_connection(secured.http, unique_name, hello(unique_name, scope, filter=FILTER,
                                  cursor=cursor)) as (again, task):
            await until(lambda: bool(again.frames) and again.frames[-1].get("through", 0) >= 50, task)
        assert again.frames[0]["recovered"] and again.frames[1]["after"] == 20  # no rescan, no snapshot
        return before, observe(again.frames, coverage)

    before, after = asyncio.run(run())
    assert before + after == expected(redis, unique_name, 0, 50)
    assert before == expected(redis, unique_name, 0, 20)


@pytest.mark.parametrize("transport", ["websocket", "sse"])
def test_a_token_scoped_to_one_tenant_asking_for_another_is_refused(
    secured: GatewayProcess, redis: redis_lib.Redis, unique_name: str, transport: str
) -> None:
    Writer(redis, unique_name).commit(5)
    asking = hello(unique_name, {unique_name: {"tenant": "acme"}}, filter={"tenant": "globex"})

    async def websocket() -> tuple[dict[str, Any], int | None]:
        async with connect(secured.ws(unique_name), open_timeout=5) as ws:
            await ws.send(json.dumps(asking))
            error = json.loads(await ws.recv())
            try:
                await ws.recv()
            except ConnectionClosed as closed:
                return error, closed.rcvd.code if closed.rcvd else None
        raise AssertionError("not closed")

    async def sse() -> tuple[dict[str, Any], int | None]:
        async with sse_connection(secured.http, unique_name, asking) as (conversation, task):
            await until(lambda: conversation.close is not None, task)
        assert conversation.close is not None
        return conversation.frames[0], conversation.close.get("code")

    error, code = asyncio.run(websocket() if transport == "websocket" else sse())
    assert isinstance(parse_server_frame(json.dumps(error)), ErrorFrame)
    assert error["code"] == code == 4423 and "scope" in error["reason"]
