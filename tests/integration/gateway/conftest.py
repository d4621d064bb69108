"""Real gateway processes (uvicorn) against the session's Redis, with entries committed through the real
commit script while tests run."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib
from playwright.sync_api import Browser

from sparkwire.client import StreamClient
from sparkwire.replaylog import ReplayLogReader, ReplayLogWriter
from sparkwire.replaylog.model import Record
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer, http_status

from .browser import launch_chromium

__all__ = ["SECRET", "Committer", "GatewayProcess", "http_status", "wait_for"]

SECRET = "test-secret-with-enough-bytes-for-hs256"


@pytest.fixture
def gateway(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()
    yield process
    process.process.stop()


@pytest.fixture
def stream_with_state(redis: redis_lib.Redis, unique_name: str) -> str:
    """A stream whose state holds 3,000 keys (~450 KB): a fresh client's snapshot takes a while to read and
    send, and is one frame of that size."""
    writer = ReplayLogWriter(redis, unique_name, retention=100_000)
    for batch in range(6):
        writer.commit_batch("state", batch, [
            Record(f"state-{batch}-{n}", f"key-{batch}-{n}", json.dumps({"n": n, "pad": "x" * 100}))
            for n in range(500)])
    return unique_name


@pytest.fixture
def committer(redis: redis_lib.Redis, unique_name: str) -> Iterator[Committer]:
    committer = Committer(redis, unique_name)
    yield committer
    committer.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launch_chromium()


@pytest.fixture
def console() -> Iterator[list[str]]:
    """The pages' console and errors, printed at teardown (shown by pytest when a test fails)."""
    lines: list[str] = []
    yield lines
    print("\n".join(lines))


async def stop_at_head(client: StreamClient, task: asyncio.Task[None], committer: Committer,
                       redis: redis_lib.Redis) -> None:
    """Stop committing, let ``client`` apply up to the log's head, then stop it and its ``run()`` task."""
    committer.stop()
    head = ReplayLogReader(redis, committer.writer.keys.stream).meta().last_seq
    await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == head, timeout=20)
    await client.stop()
    await task


def wait_for(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")
