"""ClientSession: frames built by the gateway's encoders in, state, counts and frames to send out."""

from __future__ import annotations

import json

import pytest

from sparkwire.client import ClientSession, ReceivedEntry
from sparkwire.protocol.positions import Cursor, Gap
from sparkwire.protocol.server_frames import (
    AckPolicy,
    Welcome,
    encode_ack_policy,
    encode_entry,
    encode_snapshot,
    encode_welcome,
    pack_entries,
)
from sparkwire.replaylog.model import Entry, Snapshot, StateItem


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def welcome(*, recovered: bool = True, reset: str | None = None, ack_every: int = 100, ack_interval_ms: int = 1000,
            session: str = "s1", epoch: str = "e1") -> str:
    return encode_welcome(Welcome(session=session, epoch=epoch, head_seq=0, recovered=recovered, reset=reset,
                                  ack_every=ack_every, ack_interval_ms=ack_interval_ms))


def entry(seq: int, pid: str | None = None, key: str = "k") -> Entry:
    data = json.dumps({"metricName": key, "count": seq})
    return Entry(seq=seq, processing_id=pid or f"p{seq}", key=key, data=data, commit_ms=1000 + seq, batch_id=0)


def entries(*items: Entry, epoch: str = "e1") -> str:
    [frame] = pack_entries(epoch, [encode_entry(item) for item in items])
    return frame


def snapshot(
    seq: int, items: dict[str, tuple[int, str]], epoch: str = "e1", max_frame_bytes: int = 1 << 20
) -> list[str]:
    state = {key: StateItem(seq=s, processing_id=pid, data={"metricName": key, "count": s})
             for key, (s, pid) in items.items()}
    return encode_snapshot(Snapshot(epoch=epoch, seq=seq, items=state), max_frame_bytes)


def acks(frames: list[str]) -> list[dict[str, object]]:
    """The acks, without their digests (``test_the_cursor_and_acks_carry_the_digest_of_the_entry_at_their_seq``
    checks those)."""
    return [{k: v for k, v in doc.items() if k != "digest"} for doc in map(json.loads, frames) if doc["type"] == "ack"]


def where(cursor: Cursor | dict[str, object] | None) -> tuple[object, object] | None:
    """A cursor's (epoch, seq), whether it carries a digest or not."""
    if cursor is None:
        return None
    return (cursor["epoch"], cursor["seq"]) if isinstance(cursor, dict) else (cursor.epoch, cursor.seq)


def connected(clock: FakeClock | None = None, **welcome_args: object) -> ClientSession:
    session = ClientSession(clock=clock or FakeClock(), keep_applied=True)
    session.begin_connection()
    reaction = session.handle(welcome(**welcome_args))  # type: ignore[arg-type]
    assert reaction.protocol_error is None
    return session


def test_first_hello_names_a_session_and_no_cursor_then_the_next_carries_the_cursor() -> None:
    session = ClientSession(token="tok")
    first = json.loads(session.begin_connection())
    assert first["type"] == "hello" and first["v"] == 1 and first["token"] == "tok"
    assert first["session"] and "cursor" not in first
    session.handle(welcome(session="server-given"))
    session.handle(entries(entry(1), entry(2), epoch="e7"))
    second = json.loads(session.begin_connection())
    assert second["session"] == "server-given"
    assert second["cursor"] == {"epoch": "e7", "seq": 2, "digest": entry(2).digest}
    assert session.cursor == Cursor("e7", 2, entry(2).digest)


def test_entries_are_applied_in_order_with_state_per_key_and_callback() -> None:
    seen: list[ReceivedEntry] = []
    session = ClientSession(on_entry=seen.append, keep_applied=True)
    session.begin_connection()
    session.handle(welcome())
    session.handle(entries(entry(1, key="a"), entry(2, key="b"), entry(3, key="a")))
    assert session.applied == [(1, "p1"), (2, "p2"), (3, "p3")]
    assert session.state["a"] == StateItem(seq=3, processing_id="p3", data={"metricName": "a", "count": 3})
    assert set(session.state) == {"a", "b"}
    assert [e.seq for e in seen] == [1, 2, 3]
    assert seen[0].commit_ms == 1001


def test_repeated_seqs_and_repeated_processing_ids_are_dropped_and_counted() -> None:
    session = connected()
    session.handle(entries(entry(1), entry(2)))
    session.handle(entries(entry(2), entry(3)))  # seq 2 again: a duplicate by seq
    session.handle(entries(entry(4, pid="p1")))  # a new seq holding a result already applied
    session.handle(entries(entry(5)))
    assert session.applied == [(1, "p1"), (2, "p2"), (3, "p3"), (5, "p5")]
    assert session.duplicates == 2
    assert session.last_seq == 5  # the repeated result's seq is consumed, so 5 is no gap
    assert session.gaps == 0


def test_a_revision_seen_before_a_new_epoch_comes_again_after_its_snapshot_and_updates_the_state_once() -> None:
    """A lost log: revision @7 reached the client in e1; the rebuilt epoch e2's snapshot holds @6 (the rebuild
    stops before the batch being run), then the job commits @7 again. Rendered once, state at @7."""
    session = connected()
    session.handle(entries(entry(1, pid="w@6"), entry(2, pid="w@7")))
    session.begin_connection()
    session.handle(welcome(recovered=False, reset="epoch_mismatch", epoch="e2"))
    for part in snapshot(1, {"k": (1, "w@6")}, epoch="e2"):
        session.handle(part)
    assert session.state["k"].processing_id == "w@6"
    session.handle(entries(entry(2, pid="w@7"), epoch="e2"))
    assert session.applied == [(1, "w@6"), (2, "w@7")]  # each revision rendered once
    assert (session.state["k"].processing_id, session.state["k"].seq) == ("w@7", 2)  # as the log's newest
    assert session.duplicates == 1 and session.gaps == 0


def test_a_gap_stops_applying_asks_to_resume_and_keeps_the_cursor_before_the_hole() -> None:
    session = connected()
    reaction = session.handle(entries(entry(1), entry(2)))
    assert reaction.gap is None
    reaction = session.handle(entries(entry(3), entry(5), entry(6)))
    assert reaction.gap == Gap(expected=4, got=5)
    assert session.applied == [(1, "p1"), (2, "p2"), (3, "p3")]
    assert session.gaps == 1
    assert session.cursor == Cursor("e1", 3, entry(3).digest)
    # The entries before the hole are acked before closing, so the session records them.
    assert acks(reaction.send) == [{"type": "ack", "seq": 3, "duplicates": 0, "gaps": 1}]
    assert json.loads(session.begin_connection())["cursor"] == {"epoch": "e1", "seq": 3, "digest": entry(3).digest}


def test_a_snapshot_in_parts_replaces_the_state_once_whole_and_resets_the_seq() -> None:
    session = connected()
    session.handle(entries(entry(1, key="old"), entry(2, key="a")))
    session.begin_connection()
    session.handle(welcome(recovered=False, reset="cursor_too_old", epoch="e2"))
    items = {f"key-{i}": (40 + i, f"q{i}") for i in range(5)}
    parts = snapshot(50, items, epoch="e2", max_frame_bytes=200)
    assert len(parts) > 1
    for part in parts[:-1]:
        session.handle(part)
        assert "old" in session.state  # a half snapshot does not replace anything
    session.handle(parts[-1])
    assert set(session.state) == set(items)
    assert session.state["key-3"].processing_id == "q3"
    assert session.cursor == Cursor("e2", 50)
    assert session.resets == {"cursor_too_old": 1}
    session.handle(entries(entry(51), epoch="e2"))  # the seq continues after the snapshot's
    assert session.applied[-1] == (51, "p51")
    assert session.gaps == 0


def test_a_fresh_client_gets_a_snapshot_counted_as_no_position() -> None:
    session = connected(recovered=False, reset="no_position")
    [part] = snapshot(7, {"a": (7, "x")})
    session.handle(part)
    assert session.resets == {"no_position": 1}
    assert session.cursor == Cursor("e1", 7)
    assert session.applied == []  # a snapshot is state, not applied entries


def test_a_snapshot_without_a_welcome_announcing_it_is_counted_as_unannounced() -> None:
    session = connected()
    session.handle(entries(entry(1)))
    [part] = snapshot(9, {"a": (9, "x")})
    session.handle(part)
    assert session.resets == {"unannounced": 1}
    assert session.last_seq == 9


def test_acks_are_coalesced_by_count() -> None:
    session = connected(ack_every=3)
    assert acks(session.handle(entries(entry(1), entry(2))).send) == []
    assert acks(session.handle(entries(entry(3))).send) == [{"type": "ack", "seq": 3, "duplicates": 0, "gaps": 0}]
    # A big frame yields one ack for all of it, not one per ackEvery entries.
    sent = session.handle(entries(*(entry(seq) for seq in range(4, 11)))).send
    assert acks(sent) == [{"type": "ack", "seq": 10, "duplicates": 0, "gaps": 0}]


def test_an_acks_frame_replaces_the_welcomes_policy_until_the_next_connection() -> None:
    clock = FakeClock()
    session = connected(clock, ack_every=3, ack_interval_ms=1000)
    session.handle(encode_ack_policy(AckPolicy(ack_every=5, ack_interval_ms=10_000)))
    session.handle(entries(entry(1), entry(2), entry(3)))  # an ack under the welcome's policy, not under this
    assert session.due_acks() == []
    assert session.seconds_until_ack() == pytest.approx(10.0)
    assert acks(session.handle(entries(entry(4), entry(5))).send) == [
        {"type": "ack", "seq": 5, "duplicates": 0, "gaps": 0}]
    session.begin_connection()  # a new connection: its own welcome decides again
    assert session.ack_policy is None


def test_acks_are_coalesced_by_time_and_only_when_the_seq_moved() -> None:
    clock = FakeClock()
    session = connected(clock, ack_every=100, ack_interval_ms=500)
    assert session.seconds_until_ack() is None  # nothing applied: nothing to ack
    session.handle(entries(entry(1)))
    clock.now += 0.2
    session.handle(entries(entry(2, pid="p1")))  # a duplicate by processingId still moves the seq
    assert session.seconds_until_ack() == pytest.approx(0.3)
    assert session.due_acks() == []
    clock.now += 0.3
    assert acks(session.due_acks()) == [{"type": "ack", "seq": 2, "duplicates": 1, "gaps": 0}]
    assert session.seconds_until_ack() is None
    clock.now += 10
    assert session.due_acks() == []
    assert session.final_acks() == []


def test_a_snapshot_position_is_acked_by_time() -> None:
    clock = FakeClock()
    session = connected(clock, recovered=False, reset="no_position", ack_interval_ms=100)
    [part] = snapshot(42, {})
    session.handle(part)
    clock.now += 0.1
    assert acks(session.due_acks()) == [{"type": "ack", "seq": 42, "duplicates": 0, "gaps": 0}]


def test_a_connection_resumed_after_the_cursor_acks_it_once_even_with_nothing_new() -> None:
    clock = FakeClock()
    session = connected(clock, ack_interval_ms=100)
    session.handle(entries(entry(1), entry(2)))
    session.final_acks()  # acked on the first connection; say the pod died before it reached the session
    session.begin_connection()  # the hello carries the cursor (e1, 2)
    session.handle(welcome(recovered=True, ack_interval_ms=100))
    assert session.due_acks() == []
    clock.now += 0.1
    assert acks(session.due_acks()) == [{"type": "ack", "seq": 2, "duplicates": 0, "gaps": 0}]
    clock.now += 10
    assert session.due_acks() == []  # once


def test_final_acks_flush_what_was_applied_but_not_yet_acked() -> None:
    session = connected(ack_every=100)
    session.handle(entries(entry(1), entry(2)))
    assert acks(session.final_acks()) == [{"type": "ack", "seq": 2, "duplicates": 0, "gaps": 0}]
    assert session.final_acks() == []


def test_ping_is_answered_with_pong_and_error_is_kept() -> None:
    session = connected()
    assert [json.loads(f) for f in session.handle('{"type":"ping","t":17}').send] == [{"type": "pong", "t": 17}]
    session.handle('{"type":"error","code":4401,"name":"auth_failed","reason":"token expired at 12:00"}')
    assert session.last_error is not None and session.last_error.reason == "token expired at 12:00"


@pytest.mark.parametrize(
    "frame",
    [
        "not json",
        '{"type":"entries","epoch":"e1","entries":[{"seq":"1"}]}',
        '{"type":"entries","epoch":"e1","entries":[{"seq":1,"key":"k","data":{},"commitMs":1}]}',
        '{"type":"snapshot","epoch":"e1","seq":-1,"items":{},"more":false}',
        '{"type":"welcome"}',
    ],
)
def test_malformed_server_frames_are_protocol_errors(frame: str) -> None:
    session = connected()
    assert session.handle(frame).protocol_error


def test_entries_before_welcome_and_a_second_welcome_are_protocol_errors() -> None:
    session = ClientSession()
    session.begin_connection()
    assert session.handle(entries(entry(1))).protocol_error
    session.handle(welcome())
    assert session.handle(welcome()).protocol_error


def test_unknown_frame_types_are_ignored_and_counted() -> None:
    session = connected()
    reaction = session.handle('{"type":"notice","text":"from a newer server"}')
    assert reaction.protocol_error is None and reaction.send == []
    assert session.unknown_frames == 1
    assert session.frames_received == 2


def test_a_resume_from_the_sessions_ack_starts_at_the_first_entry_not_at_a_gap() -> None:
    session = ClientSession(session_id="kept", clock=FakeClock(), keep_applied=True)  # state kept elsewhere, no cursor
    hello = json.loads(session.begin_connection())
    assert hello["session"] == "kept" and "cursor" not in hello
    session.handle(welcome(session="kept", recovered=True))
    reaction = session.handle(entries(entry(41), entry(42)))
    assert reaction.gap is None and session.gaps == 0
    assert session.applied == [(41, "p41"), (42, "p42")]
    assert session.handle(entries(entry(44))).gap == Gap(expected=43, got=44)  # later holes still count


def test_once_a_snapshot_is_whole_every_later_hello_carries_a_cursor_and_a_half_one_leaves_none() -> None:
    """The client's half of why a second ``no_position`` means a snapshot cut before its last part (the
    kind tests' journal): until one snapshot is whole the client has no position to send; from then on
    every hello names one, whatever ended the connections in between."""
    session = connected(recovered=False, reset="no_position")
    parts = snapshot(7, {f"k{n}": (n % 7 + 1, f"p{n}") for n in range(200)}, max_frame_bytes=2048)
    assert len(parts) > 2
    for part in parts[:-1]:
        session.handle(part)
    hello = json.loads(session.begin_connection())  # cut before the last part
    assert "cursor" not in hello and session.cursor is None
    session.handle(welcome(recovered=False, reset="no_position"))
    for part in parts:
        session.handle(part)
    for cut_after in range(4):  # connections that end early, on a gap, after entries
        hello = json.loads(session.begin_connection())
        assert where(hello["cursor"]) == ("e1", 7 + cut_after), hello
        session.handle(welcome())
        session.handle(entries(entry(8 + cut_after)))
        if cut_after == 2:
            assert session.handle(entries(entry(20))).gap is not None
    assert session.resets == {"no_position": 2}


def test_the_cursor_and_acks_carry_the_digest_of_the_entry_at_their_seq() -> None:
    """Issue 47: the digest the server sends with each entry and snapshot goes back with the cursor and the
    acks, so a gateway resumes only a log that still holds that entry at that seq."""
    session = connected(recovered=False, reset="no_position", ack_every=2)
    [part] = encode_snapshot(Snapshot(epoch="e1", seq=7, items={}, digest="00112233aabbccdd"))
    session.handle(part)
    assert session.cursor == Cursor("e1", 7, "00112233aabbccdd")
    reaction = session.handle(entries(entry(8), entry(9)))
    [ack] = [json.loads(frame) for frame in reaction.send]
    assert ack == {"type": "ack", "seq": 9, "duplicates": 0, "gaps": 0, "digest": entry(9).digest}
    hello = json.loads(session.begin_connection())
    assert hello["cursor"] == {"epoch": "e1", "seq": 9, "digest": entry(9).digest}


def test_a_server_older_than_digests_gets_cursors_and_acks_without_one() -> None:
    session = connected(recovered=False, reset="no_position", ack_every=1)
    session.handle(snapshot(0, {})[0])
    old_server_entry = '{"type":"entries","epoch":"e1","entries":[' \
        '{"seq":1,"processingId":"p1","key":"k","data":{"n":1},"commitMs":5}]}'
    [ack] = [json.loads(frame) for frame in session.handle(old_server_entry).send]
    assert "digest" not in ack
    assert json.loads(session.begin_connection())["cursor"] == {"epoch": "e1", "seq": 1}


def test_without_keep_applied_only_the_recent_entries_are_kept_and_applied_says_how_to_get_them() -> None:
    session = ClientSession(recent_capacity=3, clock=FakeClock())
    session.begin_connection()
    session.handle(welcome())
    reaction = session.handle(entries(*(entry(seq) for seq in range(1, 11))))
    assert [e.seq for e in reaction.applied] == list(range(1, 11))  # what connection.py hands to async for
    assert list(session.recent) == [(8, "p8"), (9, "p9"), (10, "p10")] and session.applied_count == 10
    with pytest.raises(RuntimeError, match="keep_applied=True"):
        session.applied  # noqa: B018
    assert ClientSession(recent_capacity=0).recent.maxlen == 0
    with pytest.raises(ValueError, match="recent_capacity"):
        ClientSession(recent_capacity=-1)
