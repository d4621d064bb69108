"""A stream's filtered views on a pod (issue 43): compiled once per view, each entry parsed once, the match
of an entry shared by the feeds of one view; snapshots filtered; the mode read from the descriptor."""

from __future__ import annotations

import gc
import json

from sparkwire.gateway.fanout.views import StreamViews, shared_matcher
from sparkwire.protocol.filter_form import parse_filter
from sparkwire.protocol.items import Snapshot, StateItem
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import parse_server_frame
from sparkwire.replaylog.model import Entry


def entry(seq: int, data: dict[str, object]) -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key=f"k{seq}", data=json.dumps(data), commit_ms=0, batch_id=0)


def test_a_shared_matcher_evaluates_each_parsed_entry_once() -> None:
    calls: list[str] = []

    def matcher(key: str, data: object) -> bool:
        calls.append(key)
        return key == "a"

    shared = shared_matcher(matcher, size=2)
    data = {"x": 1}
    assert [shared("a", data), shared("a", data), shared("b", data)] == [True, True, False]
    assert calls == ["a", "b"]
    assert shared("a", {"x": 1}) is True and calls == ["a", "b", "a"]  # another object: evaluated again


def test_views_are_compiled_once_and_entries_parsed_once() -> None:
    views = StreamViews(parsed_entries=2)
    view = View(None, parse_filter({"n": {"ge": 2}}))
    assert views.compiled(view) is views.compiled(View(None, parse_filter({"n": {"ge": 2}})))
    first = entry(1, {"n": 3})
    assert views.data_of(first) is views.data_of(first) == {"n": 3}
    for seq in range(2, 5):  # bounded: cleared when full, parsed again
        views.data_of(entry(seq, {"n": seq}))
    assert views.data_of(first) == {"n": 3}


def test_removals_follow_the_descriptor_s_mode() -> None:
    views = StreamViews()
    views.learn_mode(None)
    assert views.removals is None
    views.learn_mode("not json")
    assert views.removals is None
    views.learn_mode(json.dumps({"mode": "append"}))
    assert views.removals is False
    views.learn_mode(json.dumps({"mode": "update"}))
    assert views.removals is True and views.compiled(View(None, parse_filter({"a": 1}))).removals


def test_a_snapshot_as_a_view_sees_it() -> None:
    items = {"eu": StateItem(3, "p3", {"region": "eu"}), "us": StateItem(4, "p4", {"region": "us"})}
    frames = StreamViews().snapshot_frames(Snapshot("e", 4, items, "0123456789abcdef"),
                                           View(parse_filter({"region": "eu"}), None), 1 << 20)
    part = parse_server_frame(frames[0])
    assert len(frames) == 1 and part.seq == 4 and set(part.items) == {"eu"}  # type: ignore[union-attr]


def test_the_mode_is_asked_for_while_unknown_and_needed_at_most_once_a_second() -> None:
    views = StreamViews()
    assert not views.mode_wanted(0.0)  # no filtered connection: nobody needs it
    held = views.compiled(View(None, parse_filter({"tenant": "acme"})))  # a connection's feed holds its view
    assert views.mode_wanted(10.0) and not views.mode_wanted(10.5) and views.mode_wanted(11.0)
    views.learn_mode(None)  # the writer stored none yet: still unknown
    assert views.removals is None and views.mode_wanted(12.0)
    views.learn_mode(json.dumps({"mode": "update"}))
    assert views.removals is True and not views.mode_wanted(20.0)
    del held


def test_the_views_in_use_are_those_a_connection_or_request_still_holds() -> None:
    """What each live batch is evaluated for: a view whose last connection ended is no longer evaluated, and
    an update-mode view is never among them (its items depend on each feed's memory)."""
    views = StreamViews()
    tenant_a = views.compiled(View(None, parse_filter({"tenant": "a"})))
    tenant_b = views.compiled(View(None, parse_filter({"tenant": "b"})))
    assert views.compiled(View(None, parse_filter({"tenant": "a"}))) is tenant_a  # compiled once while in use
    assert {id(view) for view in views.append_views()} == {id(tenant_a), id(tenant_b)}
    del tenant_b
    gc.collect()
    assert [id(view) for view in views.append_views()] == [id(tenant_a)]
    views.learn_mode(json.dumps({"mode": "update"}))
    update = views.compiled(View(None, parse_filter({"tenant": "a"})))
    assert update.removals and [id(view) for view in views.append_views()] == [id(tenant_a)]
