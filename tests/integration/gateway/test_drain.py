"""SIGTERM: clients are closed with the resumable going-away code and the process exits in time."""

from __future__ import annotations

import asyncio
import time

from .conftest import Committer, GatewayProcess
from .raw_client import Received, collect, open_session


def test_sigterm_closes_clients_with_going_away_and_exits_cleanly(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(2)

    async def run() -> list[Received]:
        sockets = [await open_session(gateway.ws(unique_name), {"cursor": {"epoch": "", "seq": 0}})
                   for _ in range(5)]
        received = [await collect(ws, Received(), until_seq=10, timeout=5) for ws in sockets]
        gateway.process._proc.terminate()  # type: ignore[union-attr]  # SIGTERM to uvicorn only
        return [await collect(ws, r, until_seq=10_000, timeout=5) for ws, r in zip(sockets, received, strict=True)]

    started = time.monotonic()
    results = asyncio.run(run())
    assert [r.close_code for r in results] == [1001] * 5
    while gateway.process.alive and time.monotonic() - started < 10:
        time.sleep(0.1)
    assert gateway.process.returncode == 0
