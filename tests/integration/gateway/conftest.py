"""Real gateway processes (uvicorn) against the session's Redis, with entries committed through the real
commit script while tests run."""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib

from sparkwire.replaylog import Record, ReplayLogWriter
from sparkwire.stack import ManagedProcess, RedisServer, free_port

SECRET = "test-secret-with-enough-bytes-for-hs256"


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


class GatewayProcess:
    def __init__(self, workdir: Path, redis_url: str, streams: list[str], *extra: str) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "sparkwire.cli", "gateway", "--port", str(self.port),
                   "--redis-url", redis_url, "--streams", ",".join(streams), "--pod-name", f"gw-{self.port}",
                   "--drain-seconds", "5", *extra]
        self.process = ManagedProcess(f"gateway-{self.port}", command, workdir)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws(self, stream: str) -> str:
        return f"ws://127.0.0.1:{self.port}/ws?stream={stream}"

    def start(self) -> GatewayProcess:
        self.process.start()
        self.process.wait_ready(lambda: http_status(f"{self.http}/readyz") == 200, timeout=30)
        return self

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"{self.http}/metrics", timeout=5).read().decode()
        return sum(float(line.rpartition(" ")[2]) for line in text.splitlines()
                   if line.startswith(name) and not line.startswith("#"))


class Committer:
    """Commits ``per_batch`` records every ``interval`` seconds in the background, like the aggregator."""

    def __init__(self, client: redis_lib.Redis, stream: str, *, per_batch: int = 5, interval: float = 0.05,
                 retention: int = 100_000) -> None:
        self.writer = ReplayLogWriter(client, stream, retention=retention)
        self.per_batch = per_batch
        self.interval = interval
        self.batch_id = 0
        self.committed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def commit(self, batches: int = 1) -> None:
        for _ in range(batches):
            records = [Record(f"pid-{self.committed + i:08d}", f"k{(self.committed + i) % 7}",
                              json.dumps({"n": self.committed + i})) for i in range(self.per_batch)]
            self.writer.commit_batch("test-query", self.batch_id, records)
            self.batch_id += 1
            self.committed += self.per_batch

    def start(self) -> Committer:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                self.commit()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@pytest.fixture
def gateway(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()
    yield process
    process.process.stop()


@pytest.fixture
def committer(redis: redis_lib.Redis, unique_name: str) -> Iterator[Committer]:
    committer = Committer(redis, unique_name)
    yield committer
    committer.stop()


def wait_for(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")
