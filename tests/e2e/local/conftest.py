"""The local stack as an ingress would see it: N gateway processes (uvicorn) behind real nginx, the
session's Redis, entries committed through the real commit script at a steady rate."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis as redis_lib

from sparkwire.client import StreamClient
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.e2e.clients import run_until_caught_up
from sparkwire_harness.e2e.fault_loop import FaultLoop
from sparkwire_harness.stack import Committer, GatewayProcess, NginxBalancer, RedisServer

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


def kill_and_restart_one(cluster: Cluster, rng: random.Random) -> None:
    victim = rng.choice(cluster.gateways)
    victim.process.kill()  # SIGKILL: no drain, no close frames
    cluster.events.append(f"killed {victim.port}")
    time.sleep(0.5)
    victim.start()


async def run_clients(cluster: Cluster, committer: Committer, count: int, seconds: float,
                      faults: FaultLoop | None) -> list[StreamClient]:
    """``count`` clients connected before the first commit, traffic for ``seconds`` (with ``faults``
    running), then wait until every client has applied everything committed."""

    def traffic() -> None:
        committer.start()
        with faults if faults is not None else contextlib.nullcontext():
            time.sleep(seconds)
        committer.stop()

    clients = [StreamClient(cluster.url, keep_applied=True) for _ in range(count)]
    await run_until_caught_up(clients, ready=lambda c: c.stats().connects >= 1, during=traffic,
                              head=lambda: committer.committed, ready_timeout=30, catch_up_timeout=60,
                              context=lambda: f"events {cluster.events}")
    return clients
