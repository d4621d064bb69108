"""A batch cut into chunks is invisible until its last chunk is committed, then visible all at once: against
a real Redis, a blocked XREAD and a real gateway with a WebSocket client."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import redis as redis_lib
from websockets.asyncio.client import connect

from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter, plan_chunks
from sparkwire_harness.stack import GatewayProcess, RedisServer


def rec(i: int) -> Record:
    return Record(processing_id=f"pid-{i:05d}", key=f"k{i % 3}", payload=json.dumps({"i": i}))


def visible(redis: redis_lib.Redis, writer: ReplayLogWriter) -> tuple[int, int, int, int]:
    """(log length, state size, meta last_seq, meta last_batch) as any reader would see them."""
    reader = ReplayLogReader(redis, writer.keys.stream)
    meta = reader.meta()
    return redis.xlen(writer.keys.log), redis.hlen(writer.keys.state), meta.last_seq, meta.last_batch


def stage(writer: ReplayLogWriter, query: str, batch_id: int, records: list[Record], upto: int) -> list[str]:
    """Send chunks 0..upto-1 of the batch the way the writer cuts it; their statuses."""
    chunks = plan_chunks(records, writer.chunk_size)
    results = [writer._stage_chunk(query, batch_id, i, len(chunks), chunks[i]) for i in range(upto)]
    return [r.status if r is not None else "restage" for r in results]


def test_staged_chunks_are_invisible_and_the_last_chunk_shows_the_whole_batch_at_once(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = ReplayLogWriter(redis, unique_name, chunk_size=3)
    writer.commit_batch("q1", 0, [rec(i) for i in range(2)])  # an earlier batch: seqs 1..2
    before = visible(redis, writer)
    batch = [rec(i) for i in range(10, 20)]  # 4 chunks: 3 + 3 + 3 + 1

    woke: list[object] = []
    blocked = redis_lib.Redis(connection_pool=redis.connection_pool)
    reader_thread = threading.Thread(
        target=lambda: woke.append(blocked.xread({writer.keys.log: "2-0"}, block=20_000, count=1000))
    )
    reader_thread.start()

    assert stage(writer, "q1", 1, batch, 3) == ["staged", "staged", "staged"]
    reader_thread.join(timeout=1.0)
    assert reader_thread.is_alive(), f"a blocked XREAD woke up on a staged chunk: {woke}"
    assert visible(redis, writer) == before
    assert ReplayLogReader(redis, unique_name).snapshot().seq == 2
    assert redis.xrange(writer.keys.log, "(2-0", "+") == []

    # Replays of staged chunks change nothing.
    assert stage(writer, "q1", 1, batch, 3) == ["replayed"] * 3
    assert visible(redis, writer) == before

    result = writer.commit_batch("q1", 1, batch)
    reader_thread.join(timeout=5)

    assert [c.status for c in result.chunks] == ["replayed", "replayed", "replayed", "committed"]
    assert (result.appended, result.last_seq) == (10, 12)
    # The reader blocked since before the first chunk woke once, with the whole batch in one reply.
    [[_key, entries]] = woke[0]  # type: ignore[index,misc]
    assert [e[0] for e in entries] == [f"{s}-0".encode() for s in range(3, 13)]
    assert visible(redis, writer) == (12, 3, 12, 1)
    assert redis.exists(writer.keys.staging) == 0
    meta = ReplayLogReader(redis, unique_name).meta()
    assert meta.counters["batches_committed"] == 2 and meta.counters["chunks_replayed"] == 6


def test_every_chunk_of_a_committed_batch_sent_again_is_a_no_op(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    batch = [rec(i) for i in range(5)]
    writer.commit_batch("q1", 0, batch)
    log_before = redis.xrange(writer.keys.log)

    assert stage(writer, "q1", 0, batch, 3) == ["replayed"] * 3
    assert writer.commit_batch("q1", 0, batch).replayed_chunks == 3
    assert redis.xrange(writer.keys.log) == log_before
    assert redis.exists(writer.keys.staging) == 0


def test_nothing_is_visible_on_a_fresh_stream_until_the_batch_is_complete(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    assert stage(writer, "q1", 0, [rec(i) for i in range(5)], 2) == ["staged", "staged"]
    reader = ReplayLogReader(redis, unique_name)
    assert reader.meta().epoch == ""  # no epoch yet: a gateway has nothing to serve
    assert visible(redis, writer) == (0, 0, 0, -1)

    writer.commit_batch("q1", 0, [rec(i) for i in range(5)])
    assert [e.seq for e in reader.iter_all()] == [1, 2, 3, 4, 5]
    assert reader.meta().epoch


def test_a_new_query_abandons_a_staged_batch_without_leaking_it(redis: redis_lib.Redis, unique_name: str) -> None:
    """The old checkpoint's driver died mid-batch and a new checkpoint (new query id) starts at batch 0."""
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    writer.commit_batch("old", 4, [rec(1)])
    abandoned = [rec(i) for i in range(100, 105)]
    assert stage(writer, "old", 5, abandoned, 2) == ["staged", "staged"]

    result = writer.commit_batch("new", 0, [rec(1), rec(2), rec(3)])  # 2 chunks; rec(1) is a duplicate

    assert [c.status for c in result.chunks] == ["staged", "committed"]
    assert (result.appended, result.duplicates) == (2, 1)
    entries = list(ReplayLogReader(redis, unique_name).iter_all())
    assert [(e.seq, e.processing_id) for e in entries] == [(1, "pid-00001"), (2, "pid-00002"), (3, "pid-00003")]
    meta = ReplayLogReader(redis, unique_name).meta()
    assert (meta.query_id, meta.last_batch, meta.counters["batches_abandoned"]) == ("new", 0, 1)
    assert meta.counters["query_changes"] == 1
    # The old driver's last chunk arriving late is refused: what it follows is gone. (Its own writer, in
    # another process, remembers nothing the new one published.)
    chunks = plan_chunks(abandoned, 2)
    assert ReplayLogWriter(redis, unique_name, chunk_size=2)._stage_chunk("old", 5, 2, 3, chunks[2]) is None
    assert ReplayLogReader(redis, unique_name).meta().last_seq == 3


def test_a_single_chunk_batch_of_a_new_query_also_drops_what_the_old_one_staged(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    assert stage(writer, "old", 0, [rec(i) for i in range(4)], 1) == ["staged"]
    writer.commit_batch("new", 0, [rec(9)])
    assert [e.processing_id for e in ReplayLogReader(redis, unique_name).iter_all()] == ["pid-00009"]
    assert redis.exists(writer.keys.staging) == 0


def test_staged_chunks_lost_with_redis_data_are_sent_again_not_published_partly(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    batch = [rec(i) for i in range(6)]
    lost: list[int] = []

    def lose_staging(index: int, _result: object) -> None:
        if index == 1 and not lost:
            lost.append(index)
            redis.delete(writer.keys.staging)  # as a Redis restart without its AOF would

    result = writer.commit_batch("q1", 0, batch, between_chunks=lose_staging)

    assert [c.status for c in result.chunks] == ["staged", "staged", "committed"]
    assert [e.processing_id for e in ReplayLogReader(redis, unique_name).iter_all()] == [
        r.processing_id for r in batch
    ]


def test_a_gateway_client_sees_nothing_of_a_staged_batch_then_all_of_it(
    redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str, tmp_path: Path
) -> None:
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    writer.commit_batch("q1", 0, [rec(0)])
    epoch = ReplayLogReader(redis, unique_name).meta().epoch
    batch = [rec(i) for i in range(1, 8)]  # 4 chunks
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()

    async def client() -> tuple[list[int], list[int]]:
        seqs: list[int] = []

        async def read(ws: object, seconds: float) -> None:
            try:
                async with asyncio.timeout(seconds):
                    while True:
                        frame = json.loads(await ws.recv())  # type: ignore[attr-defined]
                        if frame["type"] == "entries":
                            seqs.extend(entry["seq"] for entry in frame["entries"])
                            if seqs and seqs[-1] >= 8:
                                return
            except TimeoutError:
                pass

        async with connect(gateway.ws(unique_name), open_timeout=5) as ws:
            await ws.send(json.dumps({"type": "hello", "v": 1, "cursor": {"epoch": epoch, "seq": 1}}))
            await read(ws, 1.0)  # welcome, caught up at seq 1
            await asyncio.to_thread(stage, writer, "q1", 1, batch, 3)
            await read(ws, 2.0)  # several hub polls: nothing may arrive
            while_staged = list(seqs)
            await asyncio.to_thread(writer.commit_batch, "q1", 1, batch)
            await read(ws, 10.0)
        return while_staged, seqs

    try:
        while_staged, received = asyncio.run(client())
    finally:
        gateway.stop()
    assert while_staged == []
    assert received == list(range(2, 9))
