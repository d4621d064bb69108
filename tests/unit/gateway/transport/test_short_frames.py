"""A client's short text frames read straight from the bytes, against websockets' own parser: the same texts,
and a stop at the first frame that is anything else or not whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode

from sparkwire.gateway.transport.short_frames import read_short_text_frame

# Frames a client may send, some of them ones only websockets may read: other opcodes, not final, long,
# reserved bits set, not UTF-8.
client_frames = st.one_of(
    st.builds(lambda text: Frame(Opcode.TEXT, text.encode()), st.text(max_size=60)),
    st.builds(lambda text: Frame(Opcode.TEXT, text.encode()), st.text(min_size=100, max_size=200)),
    st.builds(lambda data: Frame(Opcode.TEXT, data), st.binary(max_size=40)),  # often not UTF-8
    st.builds(lambda data: Frame(Opcode.TEXT, data, fin=False), st.binary(max_size=20)),
    st.builds(lambda data: Frame(Opcode.TEXT, data, rsv1=True), st.binary(max_size=20)),  # as compressed
    st.builds(lambda op, data: Frame(op, data), st.sampled_from([Opcode.BINARY, Opcode.PING, Opcode.PONG]),
              st.binary(max_size=20)),
)


def readable(frame: Frame) -> bool:
    """What websockets would hand on as a whole text message of at most 125 bytes, no extension involved."""
    if not (frame.opcode is Opcode.TEXT and frame.fin and not frame.rsv1 and len(frame.data) <= 125):
        return False
    try:
        frame.data.decode()
    except UnicodeDecodeError:
        return False
    return True


def serialized(frame: Frame) -> bytes:
    """Masked, as a client sends it; websockets' own serializer refuses reserved bits, so RSV1 is set after."""
    if not frame.rsv1:
        return frame.serialize(mask=True)
    raw = Frame(frame.opcode, frame.data, fin=frame.fin).serialize(mask=True)
    return bytes([raw[0] | 0x40]) + raw[1:]


def read_all(data: bytes) -> tuple[list[str], int]:
    texts, start = [], 0
    while (frame := read_short_text_frame(data, start)) is not None:
        text, start = frame
        texts.append(text)
    return texts, start


@given(st.lists(client_frames, max_size=8), st.data())
def test_the_short_text_frames_a_stream_starts_with_are_read_and_nothing_after_the_first_other(
        frames: list[Frame], data: st.DataObject) -> None:
    raws = [serialized(frame) for frame in frames]
    stream = b"".join(raws)
    cut = data.draw(st.integers(0, len(stream)), label="bytes received so far")
    received = stream[:cut]
    expected_texts, expected_stop, offset = [], 0, 0
    for frame, raw in zip(frames, raws, strict=True):
        if not readable(frame) or offset + len(raw) > cut:
            break
        offset += len(raw)
        expected_texts.append(frame.data.decode())
        expected_stop = offset
    assert read_all(received) == (expected_texts, expected_stop)


def test_an_unmasked_frame_is_left_to_websockets() -> None:
    assert read_short_text_frame(Frame(Opcode.TEXT, b'{"type":"ping","t":1}').serialize(mask=False)) is None


def test_a_frame_is_read_from_where_it_starts() -> None:
    two = Frame(Opcode.TEXT, b"a").serialize(mask=True) + Frame(Opcode.TEXT, "é".encode()).serialize(mask=True)
    first = read_short_text_frame(two)
    assert first is not None and first[0] == "a"
    assert read_short_text_frame(two, first[1]) == ("é", len(two))


def test_125_bytes_is_short_and_126_is_not() -> None:
    longest = Frame(Opcode.TEXT, b"x" * 125).serialize(mask=True)
    assert read_short_text_frame(longest) == ("x" * 125, len(longest))
    assert read_short_text_frame(Frame(Opcode.TEXT, b"x" * 126).serialize(mask=True)) is None
