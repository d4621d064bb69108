from __future__ import annotations

import hashlib
import json

import pytest

from sparkwire.protocol.client_frames import Ping, Pong, encode_heartbeat
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.server_frames import (
    AckPolicy,
    ServerFrameError,
    Welcome,
    encode_ack_policy,
    encode_entries,
    encode_entry,
    encode_error,
    encode_snapshot,
    encode_welcome,
    pack_entries,
    parse_server_frame,
)
from sparkwire.replaylog.model import Entry, Snapshot, StateItem


def entry(seq: int, data: str = '{"avg":1.5}') -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key="cpu", data=data, commit_ms=1700000000000 + seq, batch_id=0)


def test_an_entry_is_encoded_with_its_data_embedded_not_quoted() -> None:
    encoded = encode_entry(entry(7, data='{"avg": 1.5, "name": "ü"}'))
    assert json.loads(encoded.json) == {
        "seq": 7, "processingId": "p7", "key": "cpu", "data": {"avg": 1.5, "name": "ü"}, "commitMs": 1700000000007,
        # sha1("p7\n" + data as stored, UTF-8), first 16 hex digits: the same in Redis's Lua (redis.sha1hex)
        "digest": hashlib.sha1('p7\n{"avg": 1.5, "name": "ü"}'.encode()).hexdigest()[:16],
    }
    assert encoded.seq == 7
    assert encoded.nbytes == len(encoded.json.encode())


@pytest.mark.parametrize("data", ["not json", '{"x": NaN}', ""])
def test_an_entry_whose_data_is_not_json_is_refused_rather_than_sent(data: str) -> None:
    with pytest.raises(ValueError, match="data of seq 3 is not valid JSON"):
        encode_entry(entry(3, data=data))


def test_encoded_entries_are_joined_into_one_frame_without_reencoding() -> None:
    fragments = [encode_entry(entry(seq)) for seq in (1, 2, 3)]
    frame = json.loads(encode_entries("e1", fragments))
    assert frame["type"] == "entries"
    assert frame["epoch"] == "e1"
    assert [e["seq"] for e in frame["entries"]] == [1, 2, 3]


def test_packing_keeps_frames_under_the_limit_and_every_entry_once_in_order() -> None:
    fragments = [encode_entry(entry(seq)) for seq in range(1, 51)]
    frames = pack_entries("e1", fragments, max_frame_bytes=400)
    assert len(frames) > 1
    assert all(len(frame.encode()) <= 400 for frame in frames)
    seqs = [e["seq"] for frame in frames for e in json.loads(frame)["entries"]]
    assert seqs == list(range(1, 51))
    assert pack_entries("e1", fragments) == [encode_entries("e1", fragments)]
    assert pack_entries("e1", []) == []


def test_an_entry_larger_than_the_limit_goes_alone() -> None:
    big = encode_entry(entry(2, data='"' + "x" * 1000 + '"'))
    frames = pack_entries("e1", [encode_entry(entry(1)), big, encode_entry(entry(3))], max_frame_bytes=300)
    assert [[e["seq"] for e in json.loads(frame)["entries"]] for frame in frames] == [[1], [2], [3]]


def test_a_snapshot_is_one_frame_by_default_and_parts_when_large() -> None:
    items = {f"k{i:03}": StateItem(seq=i, processing_id=f"p{i}", data={"avg": i / 2}) for i in range(1, 101)}
    snapshot = Snapshot(epoch="e1", seq=100, items=items)
    (whole,) = encode_snapshot(snapshot)
    document = json.loads(whole)
    assert document == {
        "type": "snapshot", "epoch": "e1", "seq": 100, "more": False,
        "items": {k: {"seq": v.seq, "processingId": v.processing_id, "data": v.data} for k, v in items.items()},
    }
    parts = [json.loads(frame) for frame in encode_snapshot(snapshot, max_frame_bytes=500)]
    assert len(parts) > 1
    assert [p["more"] for p in parts] == [True] * (len(parts) - 1) + [False]
    assert {p["seq"] for p in parts} == {100}
    merged = {k: v for p in parts for k, v in p["items"].items()}
    assert merged == document["items"]


def test_an_empty_snapshot_still_tells_its_seq() -> None:
    (frame,) = encode_snapshot(Snapshot(epoch="", seq=0, items={}))
    assert json.loads(frame) == {"type": "snapshot", "epoch": "", "seq": 0, "items": {}, "more": False}


def test_welcome_error_and_heartbeat_frames() -> None:
    welcome = Welcome(session="s1", epoch="e1", head_seq=9, recovered=False, reset="cursor_too_old",
                      ack_every=100, ack_interval_ms=1000)
    assert json.loads(encode_welcome(welcome)) == {
        "type": "welcome", "v": 1, "session": "s1", "epoch": "e1", "headSeq": 9, "recovered": False,
        "reset": "cursor_too_old", "ackEvery": 100, "ackIntervalMs": 1000,
    }
    assert json.loads(encode_error(CloseCode.PROTOCOL_VIOLATION, "bad")) == {
        "type": "error", "code": 4400, "name": "protocol_violation", "reason": "bad",
    }
    assert json.loads(encode_heartbeat(Ping(3))) == {"type": "ping", "t": 3}
    assert json.loads(encode_heartbeat(Pong(3))) == {"type": "pong", "t": 3}


def test_an_acks_frame_round_trips_and_a_malformed_one_is_refused() -> None:
    frame = encode_ack_policy(AckPolicy(ack_every=20, ack_interval_ms=10_000))
    assert json.loads(frame) == {"type": "acks", "ackEvery": 20, "ackIntervalMs": 10_000}
    assert parse_server_frame(frame) == AckPolicy(20, 10_000)
    for bad in ('{"type": "acks", "ackEvery": 0, "ackIntervalMs": 1}', '{"type": "acks", "ackEvery": 1}',
                '{"type": "acks", "ackEvery": "1", "ackIntervalMs": 1}'):
        with pytest.raises(ServerFrameError):
            parse_server_frame(bad)
