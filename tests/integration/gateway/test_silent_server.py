"""A paused gateway (SIGSTOP: a hung pod, a long GC, a blackholed link) keeps its TCP connections open and
says nothing; the client notices the silence, drops the connection and resumes — exactly once — as soon
as a gateway answers again."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import redis as redis_lib

from sparkwire.client import ReconnectPolicy, StreamClient

from .conftest import Committer, GatewayProcess, stop_at_head

SILENCE_S = 1.5
PAUSE_S = 4.0


def test_the_client_leaves_a_silent_server_and_resumes(gateway: GatewayProcess, unique_name: str,
                                                       redis: redis_lib.Redis) -> None:
    committer = Committer(redis, unique_name, per_batch=2, interval=0.05).start()
    pid = gateway.process.pid
    assert pid is not None

    async def run() -> StreamClient:
        client = StreamClient(gateway.ws(unique_name), silence_timeout_s=SILENCE_S, keep_applied=True,
                              reconnect=ReconnectPolicy(initial_delay_s=0.2, max_delay_s=0.5), open_timeout_s=1)
        task = asyncio.create_task(client.run())
        await client.wait_until(lambda: len(client.applied) >= 20, timeout=10)
        os.kill(pid, signal.SIGSTOP)
        paused = time.monotonic()
        try:
            # The connection stays open (the kernel still holds it); only the silence gives it away.
            while client.stats().closes.get(1006, 0) == 0:
                assert time.monotonic() - paused < PAUSE_S, "the client did not notice the silent server"
                await asyncio.sleep(0.05)
            noticed = time.monotonic() - paused
            assert SILENCE_S - 0.2 < noticed < SILENCE_S + 1.5
            await asyncio.sleep(max(PAUSE_S - (time.monotonic() - paused), 0))
        finally:
            os.kill(pid, signal.SIGCONT)
        await stop_at_head(client, task, committer, redis)
        return client

    try:
        client = asyncio.run(run())
    finally:
        committer.stop()
    seqs = [seq for seq, _ in client.applied]
    assert seqs == list(range(seqs[0], committer.committed + 1))
    stats = client.stats()
    assert (stats.duplicates, stats.gaps, stats.terminal) == (0, 0, None)
