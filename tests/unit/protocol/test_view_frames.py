from __future__ import annotations

import itertools
import json

import pytest

from sparkwire.protocol.items import Entry
from sparkwire.protocol.server_frames import (
    ReceivedEntry,
    ServerFrameError,
    Welcome,
    encode_entry,
    encode_welcome,
    parse_server_frame,
)
from sparkwire.protocol.view_feed import encode_removal
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame, pack_view_entries

D = "0123456789abcdef"


def entry(seq: int, key: str = "eu") -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key=key, data=json.dumps({"n": seq}), commit_ms=5, batch_id=1)


def test_a_filtered_frame_round_trips_with_entries_and_removals_in_order() -> None:
    items = [encode_entry(entry(12)), encode_removal(entry(14, "us"))]
    [text] = pack_view_entries("e1", 10, 15, D, items, 1 << 20)
    frame = parse_server_frame(text)
    assert frame == ViewEntriesFrame(epoch="e1", after=10, through=15, digest=D, items=(
        ReceivedEntry(seq=12, processing_id="p12", key="eu", data={"n": 12}, commit_ms=5, digest=entry(12).digest),
        Removal(seq=14, key="us")))


def test_no_items_is_one_position_frame() -> None:
    [text] = pack_view_entries("e1", 10, 15, D, [], 1 << 20)
    assert json.loads(text) == {"type": "entries", "epoch": "e1", "after": 10, "through": 15, "digest": D,
                                "entries": []}


def test_a_large_frame_is_cut_into_parts_that_chain_and_each_covers_up_to_its_last_item() -> None:
    items = [encode_entry(entry(seq)) for seq in (3, 5, 8, 9)]
    texts = pack_view_entries("e1", 1, 12, D, items, 300)
    frames = [parse_server_frame(t) for t in texts]
    assert all(isinstance(f, ViewEntriesFrame) and len(t.encode()) <= 300 for f, t in zip(frames, texts, strict=True))
    assert len(frames) > 1
    chain = [(f.after, f.through) for f in frames if isinstance(f, ViewEntriesFrame)]
    assert chain[0][0] == 1 and chain[-1][1] == 12
    assert all(a[1] == b[0] for a, b in itertools.pairwise(chain))
    seqs = [i.seq for f in frames if isinstance(f, ViewEntriesFrame) for i in f.items]
    assert seqs == [3, 5, 8, 9]
    last_parts = [f for f in frames if isinstance(f, ViewEntriesFrame)][:-1]
    assert all(f.digest == entry(f.through).digest and f.items[-1].seq == f.through for f in last_parts)


def test_an_unfiltered_frame_parses_as_before() -> None:
    frame = parse_server_frame('{"type":"entries","epoch":"e","entries":[]}')
    assert type(frame).__name__ == "EntriesFrame"


@pytest.mark.parametrize(("change", "reason"), [
    ({"after": 15}, "after must be below through"),
    ({"after": -1}, "entries.after must be a non-negative integer"),
    ({"through": "15"}, "entries.through must be a non-negative integer"),
    ({"digest": "x"}, "entries.digest must be 16 lowercase hex digits"),
    ({"entries": {}}, "entries.entries must be a list"),
    ({"entries": [{"seq": 16, "key": "k", "removed": True}]}, "not in increasing order within (10, 15]"),
    ({"entries": [{"seq": 12, "key": "k", "removed": True}, {"seq": 12, "key": "k", "removed": True}]},
     "not in increasing order"),
    ({"entries": [{"seq": 12, "key": "k", "removed": False}]}, "removed must be true"),
    ({"entries": [{"seq": 12, "removed": True}]}, "entries[].key must be a string"),
    ({"entries": [{"seq": 12, "key": "k"}]}, "entries[] is missing 'processingId'"),
])
def test_a_filtered_frame_that_breaks_its_promises_is_refused(change: dict[str, object], reason: str) -> None:
    document: dict[str, object] = {"type": "entries", "epoch": "e", "after": 10, "through": 15, "digest": D,
                                   "entries": []}
    with pytest.raises(ServerFrameError) as caught:
        parse_server_frame(json.dumps(document | change))
    assert reason in str(caught.value)


def test_the_welcome_names_a_filtered_subscription_s_view() -> None:
    welcome = Welcome("s", "e", 3, True, None, 10, 1000, view=D)
    assert parse_server_frame(encode_welcome(welcome)) == welcome
    plain = Welcome("s", "e", 3, True, None, 10, 1000)
    assert "view" not in encode_welcome(plain)
    assert parse_server_frame(encode_welcome(plain)) == plain
    with pytest.raises(ServerFrameError, match=r"welcome\.view"):
        parse_server_frame(encode_welcome(plain)[:-1] + ',"view":3}')
