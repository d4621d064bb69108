"""A client cut off longer than the log's retention comes back to a snapshot: the state it ends with is
right, it sees no gap and no duplicate, and the reset is counted with its reason on both sides."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import redis as redis_lib

from sparkwire.client import StreamClient
from sparkwire.client.reconnect import ReconnectPolicy
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

RETENTION = 60


def expected_state(committed: int) -> dict[str, tuple[int, str, object]]:
    """Computed from what ``Committer`` writes, not read back from Redis: record ``n`` (0-based) has
    seq ``n + 1``, processingId ``pid-n`` and key ``k{n % 7}``."""
    latest = {f"k{n % 7}": n for n in range(committed)}
    return {key: (n + 1, f"pid-{n:08d}", {"n": n}) for key, n in latest.items()}


def test_a_client_away_longer_than_the_retention_gets_a_snapshot_and_ends_with_the_right_state(
    redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()
    committer = Committer(redis, unique_name, per_batch=5, retention=RETENTION)
    committer.commit(4)
    client = StreamClient(gateway.ws(unique_name), reconnect=ReconnectPolicy(initial_delay_s=0.1, max_delay_s=0.5),
                          keep_applied=True)

    async def run() -> int:
        task = asyncio.create_task(client.run())
        try:
            await client.wait_until(lambda: client.cursor is not None, timeout=15)  # snapshot at seq 20
            committer.commit(4)
            await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == 40, timeout=15)
            away_at = 40
            gateway.process.kill()  # the client's only way in is gone: it keeps retrying
            committer.commit(30)  # 150 entries while it is away: seqs up to 190 - 60 = 130 are trimmed
            assert ReplayLogReader(redis, unique_name).meta().first_seq > away_at + 1
            gateway.process.start()
            await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == 190, timeout=20)
            committer.commit(2)  # and live entries continue on top of the snapshot
            await client.wait_until(lambda: client.cursor is not None and client.cursor.seq == 200, timeout=10)
            return away_at
        finally:
            await client.stop()
            await task

    try:
        asyncio.run(run())
        resets = gateway.metric('sparkwire_gateway_resets_total{reason="cursor_too_old"}')
    finally:
        gateway.stop()

    stats = client.stats()
    assert stats.resets == {"no_position": 1, "cursor_too_old": 1}, stats
    assert (stats.duplicates, stats.gaps) == (0, 0), stats
    assert resets == 1
    state = {key: (item.seq, item.processing_id, item.data) for key, item in client.state.items()}
    assert state == expected_state(committer.committed)
    # Entries applied one by one: 21..40 after the first snapshot, then only 191..200 after the second.
    assert [seq for seq, _ in client.applied] == [*range(21, 41), *range(191, 201)]
    stored = {k.decode(): v for k, v in redis.hgetall(f"sparkwire:{{{unique_name}}}:state").items()}
    assert set(stored) == set(state), "the state hash names the same keys"
    assert all(json.loads(stored[key])["seq"] == seq for key, (seq, _, _) in state.items())
