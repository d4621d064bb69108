"""Session flush: the CPU one ack costs a pod when it reaches Redis (``RedisSessionRecords.write``, one pipeline
of ``HSET`` and now and then ``EXPIRE`` per flush), on a real ``redis-server``, with the gateway's connections
(hiredis packing, replies already read taken at once: replaylog/packing.py) and with the same connections
reading every reply the way redis-py does; alternating, in one run.

    .venv/bin/python bench/session_flush.py --acks 250 --flushes 200 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import redis.asyncio as redis_async

from sparkwire.replaylog.packing import BufferedReplies, HiredisPacking, pack_with_hiredis
from sparkwire.replaylog.port import AckRecord, SessionPosition
from sparkwire.replaylog.sessions import RedisSessionRecords
from sparkwire_harness.stack import RedisServer


def _client(url: str, *, buffered: bool) -> redis_async.Redis:
    """A client as ``connect_async`` makes the gateway's, or one whose connections pack with hiredis only."""
    pool = pack_with_hiredis(redis_async.BlockingConnectionPool.from_url(url, max_connections=4, timeout=5,
                                                                          socket_timeout=10, health_check_interval=10))
    if not buffered:
        pool.connection_class = type("PackedOnly", (HiredisPacking, redis_async.Connection), {})
    assert issubclass(pool.connection_class, BufferedReplies) is buffered
    return redis_async.Redis.from_pool(pool)


async def _per_ack_us(url: str, *, buffered: bool, acks: int, flushes: int) -> float:
    client = _client(url, buffered=buffered)
    try:
        records = RedisSessionRecords(client)
        batch = [AckRecord(f"{n:032x}", "metrics", SessionPosition("e" * 16, 100_000 + n, 0, 0, "d" * 16, ""),
                           1_700_000_000_000 + n, "", n % 10 == 0)  # a TTL renewed for one ack in ten
                 for n in range(acks)]
        for _ in range(5):
            await records.write(batch, pod="gw-bench", ttl_seconds=600)
        start = time.process_time()
        for _ in range(flushes):
            await records.write(batch, pod="gw-bench", ttl_seconds=600)
        return (time.process_time() - start) / (acks * flushes) * 1e6
    finally:
        await client.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--acks", type=int, default=250, help="acks per flush (a pod's 1,000 a second, every 250 ms)")
    parser.add_argument("--flushes", type=int, default=200, help="flushes per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each read path, alternating")
    args = parser.parse_args()
    results: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="sparkwire-flush-") as tmp, RedisServer(Path(tmp)) as redis:
        for _ in range(args.repeats):
            for buffered in (False, True):
                results[buffered].append(asyncio.run(_per_ack_us(redis.url, buffered=buffered, acks=args.acks,
                                                                 flushes=args.flushes)))
    for buffered, label in ((False, "every reply read as redis-py reads it"), (True, "replies already read taken")):
        figures = ", ".join(f"{us:.1f}" for us in results[buffered])
        print(f"{label}: {figures} µs of the pod's CPU per ack written ({args.acks} acks per flush)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
