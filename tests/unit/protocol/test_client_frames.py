from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkwire.protocol.client_frames import (
    Ack,
    Hello,
    Ping,
    Pong,
    ProtocolError,
    _canonical_frame,
    _parsed_frame,
    encode_ack,
    encode_hello,
    parse_client_frame,
)
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.filter_form import parse_filter
from sparkwire.protocol.limits import MAX_CLIENT_FRAME_BYTES, MAX_COUNT, MAX_SEQ
from sparkwire.protocol.positions import Cursor


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


def test_a_cursor_and_an_ack_may_carry_the_digest_of_their_entry_and_round_trip() -> None:
    hello = Hello(1, "s-1", Cursor("e1", 41, "0123456789abcdef"), None)
    assert parse_client_frame(encode_hello(hello)) == hello
    assert parse_client_frame(encode_ack(Ack(10, 2, 0, "fedcba9876543210"))) == Ack(10, 2, 0, "fedcba9876543210")
    # Without one, as a client older than digests writes them: the same frames as before.
    assert "digest" not in encode_hello(Hello(1, "s-1", Cursor("e1", 41), None))
    assert "digest" not in encode_ack(Ack(10, 2, 0))


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
        ('{"type":"hello","v":1,"cursor":{"seq":1}}', "fields epoch, seq and optionally digest"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":1,"x":0}}', "fields epoch, seq and optionally digest"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":1,"digest":"ABCDEF0123456789"}}',
         "hello.cursor.digest must be 16 lowercase hex digits"),
        ('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":1,"digest":7}}', "hello.cursor.digest must be 16"),
        ('{"type":"ack","seq":1,"duplicates":0,"gaps":0,"digest":"abc"}', "ack.digest must be 16 lowercase hex"),
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


# --- filtered subscriptions (issue 43) ----------------------------------------------------------


def test_a_hello_may_carry_a_filter_and_a_cursor_its_view() -> None:
    text = ('{"type":"hello","v":1,"filter":{"region":"eu","n":{"gt":1}},'
            '"cursor":{"epoch":"e","seq":9,"digest":"0123456789abcdef","view":"fedcba9876543210"}}')
    frame = parse_client_frame(text, filters=True)
    assert isinstance(frame, Hello)
    assert frame.filter == parse_filter({"region": "eu", "n": {"gt": 1}})
    assert frame.cursor == Cursor("e", 9, "0123456789abcdef", view="fedcba9876543210")
    assert parse_client_frame(encode_hello(frame), filters=True) == frame
    # Without them, the frames of an unfiltered client, as before.
    assert parse_client_frame('{"type":"hello","v":1,"filter":null}', filters=True) == Hello(1, None, None, None)
    plain = encode_hello(Hello(1, "s", Cursor("e", 9), None))
    assert "filter" not in plain and "view" not in plain


@pytest.mark.parametrize(("filter_json", "words"), [
    ("[]", "hello.filter must be an object"),
    ('{"n":{"gt":"5"}}', "hello.filter.n.gt must be a number, got str"),
    ('{"n":{"ne":5}}', "unknown operators ['ne']"),
    ('{"n":null}', "use {\"isNull\": true}"),
    ('{"n":{"gt":5,"lt":1}}', "matches nothing"),
    ('{"$x":1}', "reserved"),
])
def test_a_bad_filter_closes_with_invalid_filter_naming_the_part(filter_json: str, words: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame('{"type":"hello","v":1,"filter":' + filter_json + "}", filters=True)
    error = caught.value
    assert error.code is CloseCode.INVALID_FILTER
    assert words in error.reason


def test_a_cursor_view_must_look_like_an_id() -> None:
    error = refused('{"type":"hello","v":1,"cursor":{"epoch":"e","seq":1,"view":"all"}}')
    assert error.code is CloseCode.PROTOCOL_VIOLATION
    assert "hello.cursor.view must be 16 lowercase hex digits" in error.reason


def test_a_server_that_does_not_serve_filters_refuses_a_filter_as_an_unknown_field() -> None:
    # Not ignored: a gateway that ignored it would send every row to a client that asked for some.
    for filter_json in ('{"region":"eu"}', "null"):
        error = refused('{"type":"hello","v":1,"filter":' + filter_json + "}")
        assert error.code is CloseCode.PROTOCOL_VIOLATION
        assert "unknown fields ['filter']" in error.reason


# --- the frames clients write most, read without the JSON decoder -----------------------------------


digests = st.none() | st.text("0123456789abcdef", min_size=16, max_size=16)


@given(st.integers(0, MAX_SEQ), st.integers(0, MAX_COUNT), st.integers(0, MAX_COUNT), digests)
def test_every_ack_a_client_writes_is_read_without_the_json_decoder_as_the_full_parse_reads_it(
        seq: int, duplicates: int, gaps: int, digest: str | None) -> None:
    text = encode_ack(Ack(seq, duplicates, gaps, digest))
    assert _canonical_frame(text) == _parsed_frame(text, False) == Ack(seq, duplicates, gaps, digest)


def near_canonical() -> st.SearchStrategy[str]:
    """Client-written acks and heartbeats with one edit: characters inserted, dropped or changed."""
    written = st.one_of(
        st.builds(lambda s, d, g: encode_ack(Ack(s, d, g)), st.integers(0, MAX_SEQ + 10), st.integers(0, 99),
                  st.integers(0, 99)),
        st.builds(lambda t, kind: f'{{"type":"{kind}","t":{t}}}', st.integers(0, MAX_COUNT + 10),
                  st.sampled_from(["ping", "pong"])),
    )

    def edit(text: str, at: int, insert: str, drop: int) -> str:
        at %= len(text) + 1
        return text[:at] + insert + text[at + drop:]

    return st.builds(edit, written, st.integers(0, 200), st.text('0123456789abcdef-+., "\n:{}null\\', max_size=3),
                     st.integers(0, 2))


@settings(max_examples=1000)
@given(near_canonical())
def test_the_fast_read_accepts_only_what_the_full_parse_accepts_and_reads_it_alike(text: str) -> None:
    fast = _canonical_frame(text)
    if fast is None:
        return
    assert _parsed_frame(text, False) == fast


@pytest.mark.parametrize("text", [
    '{"type":"ack","seq":1,"duplicates":0,"gaps":0,"digest":"0123456789abcdef\\n"}',
    '{"type":"hello","v":1,"session":"s-1\\n"}',
    '{"type":"hello","v":1,"cursor":{"epoch":"e","seq":1,"view":"0123456789abcdef\\n"}}',
])
def test_an_id_with_a_trailing_newline_is_refused(text: str) -> None:
    assert refused(text).code is CloseCode.PROTOCOL_VIOLATION


@pytest.mark.parametrize("text", [
    '{"type":"ack","seq":01,"duplicates":0,"gaps":0}',
    '{"type":"ack","seq":1,"duplicates":00,"gaps":0}',
    '{"type":"ack","seq":-1,"duplicates":0,"gaps":0}',
    '{"type":"ack","seq":1.0,"duplicates":0,"gaps":0}',
    '{"type":"ack","seq":1e2,"duplicates":0,"gaps":0}',
    '{"type":"ack","seq":18446744073709551616,"duplicates":0,"gaps":0}',
    '{"type":"ack","seq":1,"duplicates":9223372036854775808,"gaps":0}',
    '{"type":"ack","seq":1,"duplicates":0,"gaps":0,"digest":"0123456789ABCDEF"}',
    '{"type":"ack","seq":1,"duplicates":0,"gaps":0,"digest":"0123456789abcdef","x":1}',
    '{"type":"ack","seq":1,"duplicates":0,"gaps":0,"gaps":1}',
    '{"type":"ack","seq":1,"duplicates":0,"gaps":0}\n',
    '{"type":"ping","t":01}',
    '{"type":"pong","t":9223372036854775808}',
])
def test_a_near_miss_of_the_written_form_is_left_to_the_full_parse(text: str) -> None:
    assert _canonical_frame(text) is None
