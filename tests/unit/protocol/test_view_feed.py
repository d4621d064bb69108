from __future__ import annotations

import json

import pytest

from sparkwire.protocol.filter_form import parse_filter
from sparkwire.protocol.items import Entry, StateItem
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import parse_server_frame
from sparkwire.protocol.view_feed import (
    CompiledView,
    ViewFeed,
    compile_view,
    encode_view_frame,
    filter_items,
    move_step,
    view_items,
)
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame

SCOPED = compile_view(View(parse_filter({"tenant": "acme"}), parse_filter({"n": {"ge": 10}})), removals=True)


def entry(seq: int, key: str = "k", **data: object) -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key=key, data=json.dumps(data), commit_ms=1, batch_id=1)


@pytest.mark.parametrize(("data", "previous", "verdict", "after"), [
    ({"tenant": "globex", "n": 50}, True, "skip", True),  # outside the scope: never mentioned
    ({"tenant": "globex", "n": 1}, None, "skip", None),
    ({"n": 50}, False, "skip", False),  # no tenant: outside a tenant scope too
    ({"tenant": "acme", "n": 50}, None, "deliver", True),
    ({"tenant": "acme", "n": 50}, False, "deliver", True),  # move-in
    ({"tenant": "acme", "n": 1}, True, "remove", False),  # move-out
    ({"tenant": "acme", "n": 1}, None, "remove", False),  # maybe held: a no-op if not
    ({"tenant": "acme", "n": 1}, False, "skip", False),  # already removed
    ({"tenant": "acme", "n": None}, True, "remove", False),
])
def test_move_step(data: dict[str, object], previous: bool | None, verdict: str, after: bool | None) -> None:
    assert move_step(SCOPED, previous, "k", data) == (verdict, after)


def test_append_mode_never_removes() -> None:
    append = CompiledView(SCOPED.in_scope, SCOPED.own, removals=False)
    assert move_step(append, True, "k", {"tenant": "acme", "n": 1}) == ("skip", True)
    assert move_step(append, None, "k", {"tenant": "acme", "n": 50}) == ("deliver", None)


def test_an_append_streams_feed_keeps_no_memory_per_key() -> None:
    append = CompiledView(SCOPED.in_scope, SCOPED.own, removals=False)
    feed = ViewFeed(append, 0, now_ms=0)
    run = [entry(seq, key=f"k{seq}", tenant="acme", n=seq % 20) for seq in range(1, 1001)]
    [frame] = feed.offer(run, now_ms=1)
    assert [i.entry.seq for i in frame.items] == [e.seq for e in run if e.seq % 20 >= 10]
    assert not any(i.removed for i in frame.items) and feed.previous == {}


def test_a_feed_chains_frames_and_tells_its_position_once_a_second_when_nothing_matches() -> None:
    feed = ViewFeed(SCOPED, 10, now_ms=0)
    [first] = feed.offer([entry(11, tenant="acme", n=50), entry(12, tenant="globex", n=50)], now_ms=5)
    assert (first.after, first.through, [i.entry.seq for i in first.items]) == (10, 12, [11])
    assert first.digest == entry(12, tenant="globex", n=50).digest
    assert feed.offer([entry(13, tenant="globex", n=1)], now_ms=500) == []  # not a second since the last
    [position] = feed.offer([entry(14, tenant="globex", n=1)], now_ms=1005)
    assert (position.after, position.through, position.items) == (12, 14, ())
    assert feed.due(now_ms=9000) == []  # nothing new since
    feed.offer([entry(15, tenant="globex")], now_ms=1100)
    [flushed] = feed.flush(now_ms=1101)
    assert (flushed.after, flushed.through) == (14, 15)
    [removal] = feed.offer([entry(16, tenant="acme", n=1)], now_ms=1200)  # k was delivered at 11
    assert removal.items[0].removed and removal.after == 15


def test_a_pod_that_writes_the_frame_itself_moves_the_feed_as_advance_does() -> None:
    """``frame_due`` + ``passed`` (the write-through path, which writes shared bytes) leave the feed where
    ``advance`` (which returns the frame) leaves it, run after run, with items or without, early or late."""
    view = compile_view(View(None, parse_filter({"tenant": "acme"})), removals=False)
    walking, passing = ViewFeed(view, 0, now_ms=0), ViewFeed(view, 0, now_ms=0)
    runs = [([entry(1, tenant="acme")], 10), ([entry(2, tenant="x")], 500), ([entry(3, tenant="x")], 1_200),
            ([entry(4, tenant="x"), entry(5, tenant="acme")], 1_300), ([entry(6, tenant="x")], 2_400)]
    for run, now in runs:
        items = view_items(view, run)
        frames = walking.advance(items, run[-1], now)
        framed = passing.frame_due(items, now)
        passing.passed(run[-1], now, framed=framed)
        assert framed == bool(frames)
        assert (walking.seen, walking.sent, walking.due(now + 1_000)) == (passing.seen, passing.sent,
                                                                         passing.due(now + 1_000))


def test_a_run_with_a_hole_is_refused() -> None:
    feed = ViewFeed(SCOPED, 10, now_ms=0)
    with pytest.raises(ValueError, match="does not follow seq 10"):
        feed.offer([entry(12)], now_ms=0)
    with pytest.raises(ValueError, match="without a hole"):
        feed.offer([entry(11), entry(13)], now_ms=0)


def test_frames_encode_to_what_a_client_parses() -> None:
    feed = ViewFeed(SCOPED, 0, now_ms=0)
    frames = feed.offer([entry(1, tenant="acme", n=50), entry(2, tenant="acme", n=1)], now_ms=0)
    [text] = encode_view_frame("e1", frames[0])
    parsed = parse_server_frame(text)
    assert isinstance(parsed, ViewEntriesFrame)
    assert (parsed.after, parsed.through) == (0, 2)
    assert parsed.items[1] == Removal(seq=2, key="k")


def test_snapshot_items_are_filtered_by_the_whole_view() -> None:
    items = {"a": StateItem(1, "p1", {"tenant": "acme", "n": 50}), "b": StateItem(2, "p2", {"tenant": "acme", "n": 1}),
             "c": StateItem(3, "p3", {"tenant": "globex", "n": 50})}
    assert set(filter_items(items, SCOPED)) == {"a"}
