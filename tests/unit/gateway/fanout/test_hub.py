from __future__ import annotations

import json

from sparkwire.gateway.fanout.hub import LiveBatch, LiveEntry
from sparkwire.gateway.transport.contract import serialize_text_frames
from sparkwire.protocol.server_frames import encode_entry, pack_entries
from sparkwire.replaylog.model import Entry


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
