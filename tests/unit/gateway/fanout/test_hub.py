from __future__ import annotations

import asyncio
import json

import pytest

from sparkwire.gateway.fanout.hub import MAX_REPLAY_ENCODINGS, LiveBatch, LiveEntry, StreamHub
from sparkwire.gateway.transport.contract import serialize_text_frames
from sparkwire.protocol.server_frames import encode_entry, pack_entries
from sparkwire.replaylog.memory import MemoryStreamLog
from sparkwire.replaylog.model import Entry, Record


def live(seq: int) -> LiveEntry:
    entry = Entry(seq=seq, processing_id=f"p{seq}", key="k", data=json.dumps({"n": seq}), commit_ms=seq, batch_id=0)
    return LiveEntry(entry, encode_entry(entry))


def test_a_batch_packs_its_frames_once_per_epoch_and_size_and_like_pack_entries() -> None:
    batch = LiveBatch([live(seq) for seq in range(1, 40)])
    frames = batch.frames("e1", 512)
    assert frames == pack_entries("e1", [item.encoded for item in batch], 512)
    assert len(frames) > 1
    assert batch.frames("e1", 512) is frames  # shared by every connection, not rebuilt
    assert batch.frames("e2", 512) is not frames and json.loads(batch.frames("e2", 512)[0])["epoch"] == "e2"
    seqs = [e["seq"] for frame in frames for e in json.loads(frame)["entries"]]
    assert seqs == list(range(1, 40))


def test_a_batch_knows_whether_it_is_one_run_of_consecutive_seqs() -> None:
    assert LiveBatch([live(seq) for seq in range(5, 9)]).run == (5, 8)
    assert LiveBatch([live(5)]).run == (5, 5)
    assert LiveBatch([live(5), live(7)]).run is None
    assert LiveBatch([live(6), live(5)]).run is None
    assert LiveBatch().run is None


def test_a_batch_serializes_its_frames_once_as_websocket_frames() -> None:
    batch = LiveBatch([live(seq) for seq in range(1, 40)])
    data = batch.wire("e1", 512)
    assert batch.wire("e1", 512) is data
    frames = batch.frames("e1", 512)
    assert data == b"".join(serialize_text_frames([frame]) for frame in frames)


def test_a_replayed_run_is_packed_once_per_pod_epoch_and_size_and_like_pack_entries() -> None:
    hub = StreamHub(MemoryStreamLog(), "metrics", ring_size=100)
    entries = [live(seq) for seq in range(11, 51)]
    asked: list[int] = []

    def encoded() -> list[object]:
        asked.append(1)
        return [item.encoded for item in entries]

    frames, wire = hub.replay_frames("e1", 11, 50, 512, encoded)  # type: ignore[arg-type]
    assert frames == pack_entries("e1", [item.encoded for item in entries], 512) and len(frames) > 1
    assert wire == serialize_text_frames(frames)
    again = hub.replay_frames("e1", 11, 50, 512, encoded)  # type: ignore[arg-type]
    assert again[0] is frames and again[1] is wire and len(asked) == 1  # the next client's: nothing encoded
    assert hub.replay_frames("e1", 11, 50, 4096, encoded)[0] != frames  # type: ignore[arg-type]
    assert json.loads(hub.replay_frames("e2", 11, 50, 512, encoded)[0][0])["epoch"] == "e2"  # type: ignore[arg-type]
    assert len(asked) == 3
    for first in range(MAX_REPLAY_ENCODINGS + 5):  # bounded: the oldest runs go first
        hub.replay_frames("e1", first, first, 512, lambda: [entries[0].encoded])
    assert len(hub._replays) == MAX_REPLAY_ENCODINGS
    assert ("e1", MAX_REPLAY_ENCODINGS + 4, MAX_REPLAY_ENCODINGS + 4, 512) in hub._replays
    assert ("e1", 11, 50, 512) not in hub._replays


@pytest.mark.timeout(30)
def test_the_ring_answers_at_the_head_without_the_log_even_empty_and_only_once_following() -> None:
    """A client joining a quiet stream (nothing read since the pod started: the ring is empty) needs no read of
    the log: every later entry reaches its subscription live. Behind the head, an empty ring still sends the
    caller to the log; before the hub follows, so does the head."""
    async def scenario() -> tuple[list[LiveEntry] | None, ...]:
        log = MemoryStreamLog()
        await log.commit([Record(f"r{n}", "k", json.dumps({"n": n})) for n in range(3)])
        hub = StreamHub(log, "s", ring_size=16, block_ms=50)
        before = hub.ring_after(3, 10)
        task = asyncio.create_task(hub.run())
        try:
            await asyncio.wait_for(hub.started.wait(), 5)
            at_head, behind = hub.ring_after(3, 10), hub.ring_after(2, 10)
            subscription = hub.subscribe()
            await log.commit([Record("r3", "k", json.dumps({"n": 3}))])
            for _ in range(200):
                if hub.head_seq == 4:
                    break
                await asyncio.sleep(0.01)
            live_seqs = [item.entry.seq for batch in subscription.take() for item in batch]
            return before, at_head, behind, hub.ring_after(3, 10), live_seqs  # type: ignore[return-value]
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    before, at_head, behind, after_one, live_seqs = asyncio.run(scenario())
    assert before is None  # the hub not following yet: its head is not a position it read
    assert at_head == [] and behind is None
    assert [item.entry.seq for item in after_one or []] == [4] and live_seqs == [4]


class CountingSnapshots(MemoryStreamLog):
    """The memory log, counting the snapshots read from it."""

    reads = 0

    async def snapshot(self):  # type: ignore[no-untyped-def]
        self.reads += 1
        return await super().snapshot()


async def until(condition, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


@pytest.mark.timeout(30)
def test_a_snapshot_at_the_head_serves_later_handshakes_until_the_head_or_epoch_moves() -> None:
    """Read once at the head, a snapshot is handed to the handshakes after it while the hub has read nothing
    newer; an entry the hub reads, a new epoch, or the hub losing the log sends the next one to the log."""
    async def scenario() -> list[tuple[int, int, int]]:
        log = CountingSnapshots()
        await log.commit([Record(f"r{n}", f"k{n}", json.dumps({"n": n})) for n in range(3)])
        hub = StreamHub(log, "s", ring_size=16, block_ms=50)
        task = asyncio.create_task(hub.run())
        seen: list[tuple[int, int, int]] = []

        async def take() -> None:
            snapshot, frames = await hub.snapshot(64 * 1024)
            seen.append((log.reads, snapshot.seq, len(snapshot.items)))
            assert frames

        try:
            await asyncio.wait_for(hub.started.wait(), 5)
            await take()
            await take()  # the head has not moved: no read
            await log.commit([Record("r3", "k3", json.dumps({"n": 3}))])
            await take()  # committed, not yet read by the hub: still its head's, still complete with what follows
            await until(lambda: hub.head_seq == 4)
            await take()  # the hub read seq 4: read again
            await take()
            hub.healthy = False
            await take()  # the hub not following without error: always read
            hub.healthy = True
            log.new_epoch()
            await until(lambda: hub.epoch == log.epoch)
            await take()  # another epoch: read
            return seen
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    seen = asyncio.run(scenario())
    assert seen[:5] == [(1, 3, 3), (1, 3, 3), (1, 3, 3), (2, 4, 4), (2, 4, 4)]
    assert seen[5][0] == 3 and seen[6][0] == 4
