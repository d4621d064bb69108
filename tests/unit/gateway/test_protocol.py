from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkwire.gateway.close_codes import CloseCode
from sparkwire.gateway.protocol import (
    MAX_CLIENT_FRAME_BYTES,
    Ack,
    Cursor,
    Hello,
    Ping,
    Pong,
    ProtocolError,
    Welcome,
    encode_entries,
    encode_entry,
    encode_error,
    encode_heartbeat,
    encode_snapshot,
    encode_welcome,
    pack_entries,
    parse_client_frame,
)
from sparkwire.replaylog.model import Entry, Snapshot, StateItem


def entry(seq: int, data: str = '{"avg":1.5}') -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key="cpu", data=data, commit_ms=1700000000000 + seq, batch_id=0)


def refused(text: str | bytes, max_bytes: int = MAX_CLIENT_FRAME_BYTES) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame(text, max_bytes)
    return caught.value


# --- client frames -----------------------------------------------------------------------------


def test_a_full_hello_parses() -> None:
    frame = parse_client_frame('{"type":"hello","v":1,"session":"s-1","cursor":{"epoch":"e1","seq":41},"token":"t"}')
    assert frame == Hello(version=1, session="s-1", cursor=Cursor("e1", 41), token="t")


def test_a_minimal_hello_has_no_position_and_no_token() -> None:
    assert parse_client_frame('{"type":"hello","v":1}') == Hello(1, None, None, None)
    assert parse_client_frame('{"type":"hello","v":1,"session":null,"cursor":null,"token":null}') == Hello(
        1, None, None, None
    )


def test_ack_ping_and_pong_parse() -> None:
    assert parse_client_frame('{"type":"ack","seq":10,"duplicates":2,"gaps":0}') == Ack(10, 2, 0)
    assert parse_client_frame('{"type":"ping","t":7}') == Ping(7)
    assert parse_client_frame('{"type":"pong","t":7}') == Pong(7)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not JSON"),
        ("", "not JSON"),
        ('{"type":"hello","v":1', "not JSON"),
        ("[1,2]", "JSON object"),
        ('"hello"', "JSON object"),
        ("{}", "'type'"),
        ('{"type":7}', "'type'"),
        ('{"type":"subscribe"}', "unknown frame type"),
        ('{"type":"hello"}', "'v'"),
        ('{"type":"hello","v":"1"}', "hello.v must be an integer"),
        ('{"type":"hello","v":true}', "hello.v must be an integer"),
        ('{"type":"hello","v":1,"cursr":{"epoch":"e","seq":1}}', "unknown fields ['cursr']"),
        ('{"type":"hello","v":1,"session":5}', "hello.session must be a string"),
        ('{"type":"hello","v":1,"session":"a b"}', "hello.session must be 1-128"),
        ('{"type":"hello","v":1,"token":["x"]}', "hello.token must be a string"),
        ('{"type":"hello","v":1,"cursor":5}', "hello.cursor must be an object"),
        ('{"type":"hello","v":1,"cursor":{"seq":1}}', "exactly the fields epoch and seq"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":1,"x":0}}', "exactly the fields epoch and seq"),
        ('{"type":"hello","v":1,"cursor":{"epoch":7,"seq":1}}', "hello.cursor.epoch must be a string"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":-1}}', "hello.cursor.seq must be between 0"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":1.5}}', "hello.cursor.seq must be an integer"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":"3"}}', "hello.cursor.seq must be an integer"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":18446744073709551616}}', "between 0 and"),
        ('{"type":"ack","seq":1}', "ack is missing ['duplicates', 'gaps']"),
        ('{"type":"ack","seq":1,"duplicates":-1,"gaps":0}', "ack.duplicates must be between 0"),
        ('{"type":"ack","seq":NaN,"duplicates":0,"gaps":0}', "NaN is not JSON"),
        ('{"type":"ping","t":1,"t":2}', "field 't' appears twice"),
        ('{"type":"pong"}', "pong is missing ['t']"),
        ("[" * 5000 + "]" * 5000, "not JSON"),
        ('{"type":"ack","seq":' + "9" * 5000 + ',"duplicates":0,"gaps":0}', "not JSON"),
    ],
)
def test_bad_frames_are_protocol_violations_with_a_clear_reason(text: str, words: str) -> None:
    error = refused(text, max_bytes=20_000)
    assert error.code is CloseCode.PROTOCOL_VIOLATION
    assert words in error.reason


def test_another_version_is_refused_as_unsupported_even_with_fields_this_version_does_not_know() -> None:
    error = refused('{"type":"hello","v":2,"resumeToken":"x"}')
    assert error.code is CloseCode.UNSUPPORTED_VERSION
    assert "version 2" in error.reason


def test_oversized_frames_are_refused_by_their_utf8_size() -> None:
    assert refused("x" * (MAX_CLIENT_FRAME_BYTES + 1)).code is CloseCode.MESSAGE_TOO_BIG
    hello = '{"type":"hello","v":1,"token":"' + "é" * 60 + '"}'
    assert len(hello) <= 100 < len(hello.encode())
    assert refused(hello, max_bytes=100).code is CloseCode.MESSAGE_TOO_BIG
    assert isinstance(parse_client_frame(hello, max_bytes=200), Hello)


def test_binary_frames_are_unsupported_data() -> None:
    assert refused(b'{"type":"ping","t":1}').code is CloseCode.UNSUPPORTED_DATA


def test_protocol_error_carries_code_and_reason_in_its_message() -> None:
    error = refused("{}")
    assert str(error).startswith("4400 ")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
frame_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["hello", "ack", "ping", "pong", "other"])},
    optional={
        "v": json_values | st.just(1), "session": json_values, "token": json_values, "t": json_values,
        "seq": json_values, "duplicates": json_values, "gaps": json_values,
        "cursor": json_values | st.fixed_dictionaries({"epoch": json_values, "seq": json_values}),
    },
)


@settings(max_examples=500)
@given(st.text() | frame_like.map(json.dumps) | json_values.map(json.dumps), st.integers(0, 300))
def test_any_text_either_parses_or_raises_protocol_error(text: str, max_bytes: int) -> None:
    try:
        frame = parse_client_frame(text, max_bytes)
    except ProtocolError as error:
        assert error.reason
        assert isinstance(error.code, CloseCode)
    else:
        assert isinstance(frame, Hello | Ack | Ping | Pong)


# --- server frames -----------------------------------------------------------------------------


def test_an_entry_is_encoded_with_its_data_embedded_not_quoted() -> None:
    encoded = encode_entry(entry(7, data='{"avg": 1.5, "name": "ü"}'))
    assert json.loads(encoded.json) == {
        "seq": 7, "processingId": "p7", "key": "cpu", "data": {"avg": 1.5, "name": "ü"}, "commitMs": 1700000000007,
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
