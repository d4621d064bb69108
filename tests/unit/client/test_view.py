"""ClientSession with a filtered subscription (issue 43; docs/protocol.md, "Filtered subscriptions"): the frames
come from the protocol's reference server (``view_feed.ViewFeed`` and ``encode_view_frame``, what a correct
gateway sends), and the client's result is checked against the log filtered independently."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence

import pytest

from sparkwire.client import ClientSession, FilterError, Removal
from sparkwire.protocol.filter_form import filter_document, parse_filter
from sparkwire.protocol.filter_match import compile_filter
from sparkwire.protocol.items import Entry, Snapshot, StateItem
from sparkwire.protocol.scope import View, make_view
from sparkwire.protocol.server_frames import Welcome, encode_entry, encode_snapshot, encode_welcome, pack_entries
from sparkwire.protocol.view_feed import ViewFeed, compile_view, encode_view_frame, filter_items

EPOCH = "e1"
REGIONS: tuple[object, ...] = ("eu", "us", None, "eu", "apac")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_log(n: int, keys: int = 5, seed: int = 7) -> list[Entry]:
    """Revisions of ``keys`` keys (update mode): a region that changes, sometimes null or missing."""
    rng = random.Random(seed)
    log = []
    for seq in range(1, n + 1):
        region = rng.choice(REGIONS)
        data: dict[str, object] = {"count": seq}
        if region is not None or rng.random() < 0.5:  # null written, or left out as Spark's JSON writer does
            data["region"] = region
        log.append(Entry(seq=seq, processing_id=f"p{seq}", key=f"k{rng.randrange(keys)}", data=json.dumps(data),
                         commit_ms=seq, batch_id=0))
    return log


def the_view(own: dict[str, object] | None = None, scope: dict[str, object] | None = None) -> View:
    view = make_view(None if scope is None else parse_filter(scope), None if own is None else parse_filter(own))
    assert view is not None
    return view


def feed_frames(log: Sequence[Entry], view: View, after: int, *, runs: int = 3, seed: int = 0,
                max_frame_bytes: int = 1 << 20, removals: bool = True) -> list[str]:
    """What a correct server sends a connection that starts after ``after``: the rest of ``log`` offered in
    random runs (as a merger hands them out), a position frame due by time now and then, and a flush."""
    rng = random.Random(seed)
    feed = ViewFeed(compile_view(view, removals=removals), after, now_ms=0, interval_ms=1000)
    rest = [e for e in log if e.seq > after]
    frames, now, i = [], 0, 0
    while i < len(rest):
        size = rng.randint(1, runs)
        now += rng.choice((0, 400, 1500))
        for frame in feed.offer(rest[i:i + size], now):
            frames += encode_view_frame(EPOCH, frame, max_frame_bytes=max_frame_bytes)
        i += size
    for frame in feed.flush(now):
        frames += encode_view_frame(EPOCH, frame, max_frame_bytes=max_frame_bytes)
    return frames


def welcome(view: View | None, *, recovered: bool = True, reset: str | None = None, ack_every: int = 1000) -> str:
    return encode_welcome(Welcome(session="s1", epoch=EPOCH, head_seq=0, recovered=recovered, reset=reset,
                                  ack_every=ack_every, ack_interval_ms=1000, view=None if view is None else view.id))


def snapshot(log: Sequence[Entry], seq: int, view: View) -> list[str]:
    latest: dict[str, StateItem] = {}
    for e in log[:seq]:
        latest[e.key] = StateItem(seq=e.seq, processing_id=e.processing_id, data=json.loads(e.data))
    items = filter_items(latest, compile_view(view, removals=True))
    digest = log[seq - 1].digest if seq else None
    return encode_snapshot(Snapshot(epoch=EPOCH, seq=seq, items=items, digest=digest))


def expected(log: Sequence[Entry], own: dict[str, object]) -> tuple[list[int], dict[str, int]]:
    """The oracle, without the feed: the seqs whose entry matches, and each key's latest revision if it
    matches (update mode: a key whose newest revision stopped matching is gone)."""
    match = compile_filter(parse_filter(own))
    seqs = [e.seq for e in log if match(e.key, json.loads(e.data))]
    latest = {e.key: e for e in log}
    return seqs, {k: e.seq for k, e in latest.items() if match(k, json.loads(e.data))}


def move_outs(log: Sequence[Entry], own: dict[str, object]) -> list[tuple[int, str]]:
    """The oracle's removals: a revision that does not match, of a key whose last revision did."""
    match, held, out = compile_filter(parse_filter(own)), set(), []
    for e in log:
        if match(e.key, json.loads(e.data)):
            held.add(e.key)
        elif e.key in held:
            held.remove(e.key)
            out.append((e.seq, e.key))
    return out


def started(view: View, own: dict[str, object] | None, log: Sequence[Entry] = (), **kwargs: object) -> ClientSession:
    """A session connected from scratch: a welcome naming the view and the view's snapshot at seq 0."""
    session = ClientSession(filter=own, keep_applied=True, clock=FakeClock(), **kwargs)  # type: ignore[arg-type]
    session.begin_connection()
    for frame in [welcome(view, recovered=False, reset="no_position"), *snapshot(log, 0, view)]:
        assert session.handle(frame).protocol_error is None
    return session


def handle_all(session: ClientSession, frames: Sequence[str]) -> None:
    for frame in frames:
        reaction = session.handle(frame)
        assert reaction.protocol_error is None and reaction.gap is None


def state_seqs(session: ClientSession) -> dict[str, int]:
    return {key: item.seq for key, item in session.state.items()}


def prefixes(frames: Sequence[str]) -> Iterator[int]:
    yield from range(len(frames) + 1)


OWN: dict[str, object] = {"region": {"in": ["eu", "apac"]}}


def test_the_hello_carries_the_filter_and_the_cursor_the_view_once_the_welcome_gave_it() -> None:
    view = the_view(OWN)
    log = make_log(20)
    session = ClientSession(filter=OWN)
    first = json.loads(session.begin_connection())
    assert first["filter"] == filter_document(parse_filter(OWN)) and "cursor" not in first
    handle_all(session, [welcome(view, recovered=False, reset="no_position"), *snapshot(log, 0, view)])
    handle_all(session, feed_frames(log, view, 0))
    second = json.loads(session.begin_connection())
    assert second["filter"] == first["filter"]
    assert second["cursor"] == {"epoch": EPOCH, "seq": 20, "digest": log[19].digest, "view": view.id}


@pytest.mark.parametrize(("runs", "max_frame_bytes"), [(3, 1 << 20), (8, 260)])  # 260: a frame cut per item
def test_a_filtered_stream_is_applied_exactly_once_across_a_reconnect_from_any_covered_position(
    runs: int, max_frame_bytes: int,
) -> None:
    """Every cut between frames, and every older covered position the server may resume from (a session's
    ack behind the cursor): each matching entry once, in seq order, and the state of the log's newest
    matching revisions."""
    log = make_log(40)
    view = the_view(OWN)
    want_seqs, want_state = expected(log, OWN)
    frames = feed_frames(log, view, 0, seed=1, runs=runs, max_frame_bytes=max_frame_bytes)
    assert max_frame_bytes > 1000 or len(frames) > len(feed_frames(log, view, 0, seed=1, runs=runs)) + 10
    positions = [0, *(json.loads(f)["through"] for f in frames)]
    checked = 0
    want_removed = move_outs(log, OWN)
    for cut in prefixes(frames):
        for resume_from in positions[:cut + 1]:
            removed: list[Removal] = []
            session = started(view, OWN, on_removal=removed.append)
            handle_all(session, frames[:cut])
            hello = json.loads(session.begin_connection())
            assert hello["cursor"]["seq"] == positions[cut]
            assert hello["cursor"]["view"] == view.id
            handle_all(session, [welcome(view), *feed_frames(log, view, resume_from, seed=cut, runs=runs,
                                                              max_frame_bytes=max_frame_bytes)])
            assert [seq for seq, _ in session.applied] == want_seqs
            assert state_seqs(session) == want_state
            assert [(r.seq, r.key) for r in removed] == want_removed
            assert session.cursor is not None and session.cursor.seq == 40 and session.gaps == 0
            checked += 1
    assert checked > 100 and len(want_seqs) > 10 and want_state and len(want_removed) > 3


def test_a_dropped_frame_is_a_gap_and_the_resume_from_covered_fills_it() -> None:
    log = make_log(40)
    view = the_view(OWN)
    want_seqs, want_state = expected(log, OWN)
    frames = feed_frames(log, view, 0, seed=2)
    for lost in range(len(frames) - 1):  # the last frame's loss shows at the resume: nothing follows it here
        session = started(view, OWN)
        handle_all(session, frames[:lost])
        before = (session.cursor, dict(session.state), session.applied_count)
        reaction = session.handle(frames[lost + 1])
        assert reaction.gap is not None and reaction.applied == ()
        assert (session.cursor, session.state, session.applied_count) == before  # nothing of it applied
        assert session.gaps == 1
        covered = json.loads(frames[lost])["after"]
        assert reaction.gap.expected == covered + 1 and reaction.gap.got == json.loads(frames[lost + 1])["after"] + 1
        hello = json.loads(session.begin_connection())
        assert hello["cursor"]["seq"] == covered
        handle_all(session, [welcome(view), *feed_frames(log, view, covered, seed=lost)])
        assert [seq for seq, _ in session.applied] == want_seqs and state_seqs(session) == want_state


def test_a_gap_acks_what_was_applied_before_it() -> None:
    log = make_log(30)
    view = the_view(OWN)
    frames = feed_frames(log, view, 0, seed=3)
    session = started(view, OWN)
    handle_all(session, frames[:2])
    reaction = session.handle(frames[3])
    assert reaction.gap is not None
    [ack] = [json.loads(f) for f in reaction.send]
    assert (ack["type"], ack["seq"], ack["gaps"]) == ("ack", json.loads(frames[1])["through"], 1)
    assert ack["digest"] == log[ack["seq"] - 1].digest


def test_repeated_and_overlapping_frames_are_dropped_and_counted() -> None:
    log = make_log(30)
    view = the_view(OWN)
    frames = feed_frames(log, view, 0, seed=4)
    session = started(view, OWN)
    handle_all(session, frames)
    applied, state = list(session.applied), dict(session.state)
    items = sum(len(json.loads(f)["entries"]) for f in frames)
    handle_all(session, frames)  # every frame again
    handle_all(session, feed_frames(log, view, 0, seed=5, runs=7))  # the same stretch, cut otherwise
    assert session.applied == applied and session.state == state
    assert session.duplicates == 2 * items and session.gaps == 0
    # A frame reaching past the position: only its items beyond the position are applied.
    more = make_log(36)
    [overlap] = feed_frames(more, view, 25, runs=100)
    reaction = session.handle(overlap)
    fresh = [i for i in json.loads(overlap)["entries"] if i["seq"] > 30 and "removed" not in i]
    assert [e.seq for e in reaction.applied] == [i["seq"] for i in fresh]
    assert session.cursor is not None and session.cursor.seq == 36


def test_a_result_that_comes_again_under_another_seq_is_not_applied_twice() -> None:
    """As unfiltered: the dedup by processingId catches a result that comes again under another seq."""
    view = the_view(OWN)
    first = [Entry(seq=1, processing_id="w@1", key="a", data='{"region":"eu"}', commit_ms=1, batch_id=0)]
    session = started(view, OWN)
    handle_all(session, feed_frames(first, view, 0))
    again = Entry(seq=2, processing_id="w@1", key="a", data='{"region":"eu","n":2}', commit_ms=2, batch_id=0)
    handle_all(session, feed_frames([*first, again], view, 1))
    assert session.applied == [(1, "w@1")] and session.state["a"].seq == 2 and session.duplicates == 1


def test_removals_take_a_key_out_once_and_a_removal_of_a_key_not_held_is_a_no_op() -> None:
    def rev(seq: int, key: str, region: str) -> Entry:
        return Entry(seq=seq, processing_id=f"p{seq}", key=key, data=json.dumps({"region": region}),
                     commit_ms=seq, batch_id=0)

    log = [rev(1, "a", "eu"), rev(2, "b", "us"), rev(3, "a", "us"), rev(4, "a", "us"), rev(5, "a", "eu"),
           rev(6, "c", "eu"), rev(7, "c", "us")]
    view = the_view({"region": "eu"})
    removed: list[Removal] = []
    session = started(view, {"region": "eu"}, on_removal=removed.append)
    held_after = {1: ["a"], 2: ["a"], 3: [], 4: [], 5: ["a"], 6: ["a", "c"], 7: ["a"]}
    for frame in feed_frames(log, view, 0, runs=1):
        handle_all(session, [frame])
        assert sorted(session.state) == held_after[json.loads(frame)["through"]]
    # b never matched: its removal (previous unknown on a fresh feed) was a no-op, neither counted nor told.
    assert removed == [Removal(3, "a"), Removal(7, "c")] and session.view.removals == 2
    # A resume from an older position repeats removals and entries: nothing is removed or applied twice.
    session.begin_connection()
    handle_all(session, [welcome(view), *feed_frames(log, view, 2, runs=1)])
    assert removed == [Removal(3, "a"), Removal(7, "c")] and sorted(session.state) == ["a"]
    assert [seq for seq, _ in session.applied] == [1, 5, 6]


def test_nulls_in_filtered_fields_match_only_is_null_and_are_applied_as_sent() -> None:
    rows = ['{"closedAt": null, "n": 1}', '{"n": 2}', '{"closedAt": "2026-01-01", "n": 3}', '{"closedAt": 0, "n": 4}',
            '{"closedAt": null, "n": "5"}']
    log = [Entry(seq=i, processing_id=f"p{i}", key=f"k{i}", data=d, commit_ms=i, batch_id=0)
           for i, d in enumerate(rows, 1)]
    for own, seqs in (({"closedAt": {"isNull": True}}, [1, 2, 5]), ({"closedAt": {"isNull": False}}, [3, 4]),
                      ({"n": {"lt": 5}}, [1, 2, 3, 4]), ({"n": {"ge": 5}}, []), ({"closedAt": 0}, [4])):
        view = the_view(own)
        session = started(view, own)
        handle_all(session, feed_frames(log, view, 0))
        assert [seq for seq, _ in session.applied] == seqs, own
        assert session.cursor is not None and session.cursor.seq == 5  # past the entries it did not receive
        if 1 in seqs:
            assert session.state["k1"].data == {"closedAt": None, "n": 1}


def test_position_frames_move_the_cursor_and_start_the_ack_clock() -> None:
    log = make_log(10)
    view = the_view({"region": "nowhere"})
    clock = FakeClock()
    session = ClientSession(filter={"region": "nowhere"}, clock=clock)
    session.begin_connection()
    handle_all(session, [welcome(view, recovered=False, reset="no_position"), *snapshot(log, 0, view)])
    clock.now += 2
    assert [json.loads(f)["seq"] for f in session.due_acks()] == [0]  # the snapshot's position, acked
    assert session.seconds_until_ack() is None
    frames = feed_frames(log, view, 0, removals=False)  # an append stream: no removals either
    assert frames and all(json.loads(f)["entries"] == [] for f in frames)
    handle_all(session, frames)
    assert session.cursor is not None and session.cursor.seq == 10 and session.applied_count == 0
    assert session.seconds_until_ack() is not None
    clock.now += 1.5
    [ack] = [json.loads(f) for f in session.due_acks()]
    assert (ack["seq"], ack["digest"]) == (10, log[9].digest)


def test_acks_by_count_carry_the_covered_position() -> None:
    log = make_log(30)
    view = the_view(OWN)
    session = ClientSession(filter=OWN, clock=FakeClock())
    session.begin_connection()
    handle_all(session, [welcome(view, recovered=False, reset="no_position", ack_every=1), *snapshot(log, 0, view)])
    sent = []
    for frame in feed_frames(log, view, 0, seed=6):
        reaction = session.handle(frame)
        sent += [json.loads(f) for f in reaction.send]
        if json.loads(frame)["entries"]:
            assert sent[-1]["seq"] == json.loads(frame)["through"]
    assert sent and all(a["digest"] == log[a["seq"] - 1].digest for a in sent)


def test_a_snapshot_with_reset_view_changed_replaces_the_state_and_the_cursors_view() -> None:
    log = make_log(30)
    old, new = the_view(OWN), the_view({"region": "us"})
    session = started(old, OWN)
    handle_all(session, feed_frames(log, old, 0))
    assert session.cursor is not None and session.cursor.view == old.id
    session.begin_connection()
    handle_all(session, [welcome(new, recovered=False, reset="view_changed")])
    assert session.cursor is not None and session.cursor.view == old.id  # no snapshot yet: still the old position
    session.begin_connection()  # dropped before the snapshot: the cursor still names the old view
    handle_all(session, [welcome(new, recovered=False, reset="view_changed"), *snapshot(log, 20, new)])
    assert session.resets["view_changed"] == 2
    _, want_state = expected(log[:20], {"region": "us"})
    assert state_seqs(session) == want_state
    assert session.cursor is not None and (session.cursor.seq, session.cursor.view) == (20, new.id)
    handle_all(session, feed_frames(log, new, 20))
    assert state_seqs(session) == expected(log, {"region": "us"})[1]


def test_a_scoped_token_without_a_filter_of_its_own_gets_a_view_and_keeps_it_in_the_cursor() -> None:
    log = make_log(20)
    view = the_view(scope={"region": "eu"})
    session = started(view, None)
    handle_all(session, feed_frames(log, view, 0))
    hello = json.loads(session.begin_connection())
    assert "filter" not in hello and hello["cursor"]["view"] == view.id
    assert [seq for seq, _ in session.applied] == expected(log, {"region": "eu"})[0]


def test_a_resume_from_the_session_alone_takes_the_first_frames_after_as_its_position() -> None:
    log = make_log(30)
    view = the_view(OWN)
    session = ClientSession(filter=OWN, keep_applied=True)
    assert "cursor" not in json.loads(session.begin_connection())
    handle_all(session, [welcome(view, recovered=True), *feed_frames(log, view, 12)])
    assert [seq for seq, _ in session.applied] == [s for s in expected(log, OWN)[0] if s > 12]
    assert session.cursor is not None and (session.cursor.seq, session.cursor.view) == (30, view.id)


def test_frames_of_the_wrong_kind_for_the_connection_are_protocol_errors() -> None:
    log = make_log(5)
    view = the_view(OWN)
    plain = pack_entries(EPOCH, [encode_entry(e) for e in log])[0]
    session = started(view, OWN)
    assert session.handle(plain).protocol_error == "an unfiltered entries frame on a connection with a view"
    unfiltered = ClientSession()
    unfiltered.begin_connection()
    unfiltered.handle(welcome(None))
    assert "welcome names no view" in (unfiltered.handle(feed_frames(log, view, 0)[0]).protocol_error or "")
    asked = ClientSession(filter=OWN)
    asked.begin_connection()  # a server that would ignore the filter and send every row
    assert asked.handle(welcome(None)).protocol_error == "the hello asked for a filter but the welcome names no view"


@pytest.mark.parametrize(("bad", "reason"), [
    ({"count": {"gt": "5"}}, "filter.count.gt must be a number"),
    ({"region": None}, "filter.region"),
    ({"$tenant": "acme"}, "reserved"),
    ({"count": {"gt": 5, "lt": 3}}, "filter.count"),
    (["region"], "filter must be an object"),
])
def test_a_bad_filter_is_refused_when_the_session_is_made(bad: object, reason: str) -> None:
    with pytest.raises(FilterError, match=re.escape(reason)):
        ClientSession(filter=bad)  # type: ignore[arg-type]


def test_a_filter_whose_hello_could_exceed_the_client_frame_limit_is_refused() -> None:
    with pytest.raises(FilterError, match="8192-byte limit"):
        ClientSession(filter={"name": {"in": [f"{i:03}" + "x" * 200 for i in range(40)]}})
    ClientSession(filter={"name": {"in": [f"{i:03}" + "x" * 200 for i in range(30)]}})  # fits


def test_without_a_filter_nothing_changes_in_the_hello_or_the_cursor() -> None:
    session = ClientSession()
    hello = json.loads(session.begin_connection())
    assert "filter" not in hello
    session.handle(welcome(None))
    session.handle(pack_entries(EPOCH, [encode_entry(e) for e in make_log(3)])[0])
    cursor = json.loads(session.begin_connection())["cursor"]
    assert set(cursor) == {"epoch", "seq", "digest"} and session.cursor is not None and session.cursor.view is None


def test_a_position_resumed_without_a_view_loses_the_old_view_in_the_cursor() -> None:
    """Seq 0 fits every view: a scoped token's snapshot at 0, then a token without the scope resumes it
    unfiltered; the cursor no longer names the old view (which would cost a needless view_changed snapshot)."""
    view = the_view(scope={"region": "eu"})
    session = started(view, None)
    session.begin_connection()
    handle_all(session, [welcome(None), pack_entries(EPOCH, [encode_entry(e) for e in make_log(3)])[0]])
    assert session.cursor is not None and (session.cursor.seq, session.cursor.view) == (3, None)
