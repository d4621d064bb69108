"""The local stack as an ingress would see it: N gateway processes (uvicorn) behind real nginx, the
session's Redis, entries committed through the real commit script at a steady rate."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis as redis_lib

from sparkwire.client import StreamClient
from sparkwire.replaylog import ReplayLogReader
from sparkwire.stack import Committer, GatewayProcess, NginxBalancer, RedisServer

GATEWAYS = 3


@dataclass
class Cluster:
    stream: str
    gateways: list[GatewayProcess]
    nginx: NginxBalancer
    redis: redis_lib.Redis
    events: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.nginx.ws_url}/ws?stream={self.stream}"

    def log_entries(self) -> list[tuple[int, str]]:
        return [(e.seq, e.processing_id) for e in ReplayLogReader(self.redis, self.stream).iter_all()]


@pytest.fixture
def cluster(redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str, tmp_path: Path) -> Iterator[Cluster]:
    gateways = [GatewayProcess(tmp_path, redis_server.url, [unique_name]).start() for _ in range(GATEWAYS)]
    nginx = NginxBalancer(tmp_path / "nginx", [g.port for g in gateways])
    nginx.start()
    try:
        yield Cluster(unique_name, gateways, nginx, redis)
    finally:
        nginx.stop()
        for gateway in gateways:
            gateway.process.stop()


class FaultLoop:
    """Injects a fault every ``every`` seconds in the background while traffic keeps flowing."""

    def __init__(self, fault: object, every: float) -> None:
        self.fault = fault
        self.every = every
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.fault()  # type: ignore[operator]
            self.count += 1

    def __enter__(self) -> FaultLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def kill_and_restart_one(cluster: Cluster, rng: random.Random) -> None:
    victim = rng.choice(cluster.gateways)
    victim.process.kill()  # SIGKILL: no drain, no close frames
    cluster.events.append(f"killed {victim.port}")
    time.sleep(0.5)
    victim.start()


def _caught_up(client: StreamClient, seq: int) -> bool:
    return bool(client.applied) and client.applied[-1][0] >= seq


async def run_clients(cluster: Cluster, committer: Committer, count: int, seconds: float,
                      faults: FaultLoop | None) -> list[StreamClient]:
    """``count`` clients connected before the first commit, traffic for ``seconds`` (with ``faults``
    running), then wait until every client has applied everything committed."""
    clients = [StreamClient(cluster.url) for _ in range(count)]
    tasks = [asyncio.create_task(c.run()) for c in clients]
    try:
        for client in clients:
            await client.wait_until(lambda c=client: c.stats().connects >= 1, timeout=30)
        committer.start()
        if faults is not None:
            with faults:
                await asyncio.sleep(seconds)
        else:
            await asyncio.sleep(seconds)
        committer.stop()
        last = committer.committed
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(_caught_up(c, last) for c in clients):
            await asyncio.sleep(0.2)
        behind = [c for c in clients if not _caught_up(c, last)]
        assert not behind, (
            f"{len(behind)} clients behind seq {last}; e.g. "
            + "; ".join(f"at {c.applied[-1][0] if c.applied else 0}: {c.stats()}" for c in behind[:3])
            + f"; events {cluster.events}"
        )
        await asyncio.sleep(1.5)  # one ack interval: the last acks reach the session hashes
    finally:
        for client in clients:
            await client.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
    return clients
