"""A fresh client whose connection is cut inside its snapshot is as fresh as before: its next welcome says
``no_position`` again, and after the snapshot it does apply it gets every entry exactly once (issue 22).

This is the signature the kind suite reported as "one snapshot but two ``no_position`` resets", produced
here on purpose: toxiproxy cuts the gateway's side of the first connection inside the snapshot frame
(``limit_data``, as the chaos run's "cut" fault). The client's journal (``sparkwire_harness.e2e.journal``)
shows the cut connection, and ``unexplained_resets`` accepts it as the protocol's promise, while it rejects a reset
after the applied snapshot (its unit tests), which a lost cursor or session would give.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import redis as redis_lib

from sparkwire.client import ReconnectPolicy, StreamClient
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.e2e.journal import record, unexplained_resets
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

from .conftest import stop_at_head

CUT_AFTER_BYTES = 20_000  # past the welcome (~250 bytes), well inside the ~450 KB snapshot frame


def test_a_snapshot_cut_before_its_end_leaves_the_client_fresh_and_the_next_one_serves_it_exactly_once(
    redis_server: RedisServer, redis: redis_lib.Redis, stream_with_state: str, toxiproxy: Toxiproxy, tmp_path: Path
) -> None:
    stream = stream_with_state
    gateway = GatewayProcess(tmp_path, redis_server.url, [stream]).start()
    committer = Committer(redis, stream, per_batch=1, interval=0.05).start()
    try:
        port = toxiproxy.create_proxy("gateway", gateway.port)
        cut = toxiproxy.add_fault("gateway", "cut", "cut", {"bytes": CUT_AFTER_BYTES})
        client = StreamClient(f"ws://127.0.0.1:{port}/ws?stream={stream}",
                              reconnect=ReconnectPolicy(initial_delay_s=0.5, max_delay_s=1.0), keep_applied=True)
        journal = record(client)

        async def run() -> None:
            task = asyncio.create_task(client.run())
            deadline = time.monotonic() + 20
            while not client.stats().closes and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            toxiproxy.remove("gateway", cut)  # the next connections go through whole
            await client.wait_until(lambda: bool(journal.snapshots), timeout=20)
            await client.wait_until(lambda: len(client.applied) >= 20, timeout=20)
            await stop_at_head(client, task, committer, redis)

        asyncio.run(run())
    finally:
        committer.stop()
        gateway.stop()

    journal.settle()
    first = journal.records[0]
    assert (first.welcomed, first.reset, first.applied_snapshot) == (True, "no_position", None), first
    assert first.ended_with == {1006: 1}, first  # cut without a close frame
    stats = client.stats()
    assert stats.resets["no_position"] >= 2 and set(stats.resets) == {"no_position"}, stats.resets
    assert unexplained_resets(journal.records) == [], [r.describe() for r in journal.records]
    [start] = journal.snapshots
    log = ReplayLogReader(redis, stream).read_after(start, 100_000)
    assert client.applied == [(entry.seq, entry.processing_id) for entry in log]
    assert (stats.duplicates, stats.gaps) == (0, 0), stats
