"""A client's short text frames read straight from the bytes the socket received: what a connection hears
most (an ack every second or so, a ping now and then), each a single masked frame of at most 125 bytes.

Through websockets' parser (a generator per frame, a ``Frame`` object, the event list) and uvicorn's event
dispatch, one such frame cost about as much as the JSON parse of the ack it carries. ``read_short_text_frame``
reads the ones it can prove are exactly that, from a frame boundary on, and stops at the first it cannot:
any other opcode (a ping, a pong, a close, binary, a continuation), a frame not final, reserved bits set
(compression), not masked, longer than 125 bytes, not whole yet, or not UTF-8. Those bytes, and everything
after them, go websockets' way, so every rule of RFC 6455 stays websockets'; a frame read here is one
websockets would have handed on as a text message with the same text. Pure: tested against websockets' own
parser (tests/unit/gateway/transport/test_short_frames.py).
"""

from __future__ import annotations

try:
    from websockets.speedups import apply_mask  # websockets' C extension, which its wheels carry
except ImportError:  # built from source without a compiler: websockets' own pure-Python one
    from websockets.utils import apply_mask

# FIN set, no reserved bits, opcode 1 (text).
_FINAL_TEXT = 0x81
# The mask bit (a client's frames must be masked) and a length in the first byte's 7 bits: 0-125.
_MASKED_SHORT = range(0x80, 0x80 + 126)
_HEADER_AND_MASK = 6


def read_short_text_frame(data: bytes, start: int = 0) -> tuple[str, int] | None:
    """The text of the short, final, masked text frame at ``start`` of ``data`` (a frame boundary) and where
    the next frame starts; None if what is there is anything else, or not whole yet."""
    if len(data) - start < _HEADER_AND_MASK:
        return None
    second = data[start + 1]
    if data[start] != _FINAL_TEXT or second not in _MASKED_SHORT:
        return None
    payload = start + _HEADER_AND_MASK
    end = payload + second - 0x80
    if end > len(data):
        return None
    try:
        return apply_mask(data[payload:end], data[start + 2:payload]).decode(), end
    except UnicodeDecodeError:
        return None


__all__ = ["read_short_text_frame"]
