"""Clients report their cumulative duplicate and gap counts with their acks; each pod counts only what is
new since the session's stored counts, so the metric summed over pods equals what the clients saw, even
when a session moves between pods — and the session hash holds the same numbers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import redis as redis_lib

from sparkwire.replaylog.sessions import session_key
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

from .raw_client import Received, collect, open_session


def test_reported_duplicates_and_gaps_are_counted_once_across_pods(
    redis_server: RedisServer, redis: redis_lib.Redis, committer: Committer, unique_name: str, tmp_path: Path
) -> None:
    pods = [GatewayProcess(tmp_path, redis_server.url, [unique_name]).start() for _ in range(2)]
    committer.commit(6)  # seqs 1..30

    async def visit(pod: GatewayProcess, acks: list[tuple[int, int, int]], session: str | None = None) -> Received:
        ws = await open_session(pod.ws(unique_name), {"session": session, "cursor": {"epoch": "", "seq": 0}})
        received = await collect(ws, Received(), until_seq=30)
        for seq, duplicates, gaps in acks:
            await ws.send(json.dumps({"type": "ack", "seq": seq, "duplicates": duplicates, "gaps": gaps}))
        await asyncio.sleep(0.3)
        await ws.close()
        return received

    try:
        # What the client saw: 2 duplicates and 1 gap on the first pod, 3 more duplicates on the second.
        first = asyncio.run(visit(pods[0], [(10, 1, 0), (20, 2, 1)]))
        assert first.welcome is not None
        session = first.welcome["session"]  # issued by the first pod, kept by the second
        second = asyncio.run(visit(pods[1], [(25, 5, 1), (30, 5, 1)], session))
        assert second.welcome is not None and second.welcome["session"] == session
        # The second pod is told of no new gap, so it never counts one: no sample of its gap counter, 0.
        per_pod = [(pod.metric(f'sparkwire_client_reported_duplicates_total{{stream="{unique_name}"}}'),
                    pod.metric(f'sparkwire_client_reported_gaps_total{{stream="{unique_name}"}}', default=0))
                   for pod in pods]
    finally:
        for pod in pods:
            pod.stop()

    assert per_pod == [(2, 1), (3, 0)]
    assert sum(d for d, _ in per_pod) == 5 and sum(g for _, g in per_pod) == 1
    stored = {k.decode(): v.decode() for k, v in redis.hgetall(session_key(session, unique_name)).items()}
    assert (stored["seq"], stored["duplicates"], stored["gaps"]) == ("30", "5", "1")
