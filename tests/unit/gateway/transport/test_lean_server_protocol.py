"""A copied ``LeanServerProtocol`` is what websockets' ``ServerProtocol.__init__`` makes for an open connection:
the same attributes with the same values, nothing mutable shared between two connections, and frames parsed
for each on its own."""

from __future__ import annotations

import enum
import logging
import uuid

import pytest
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

from sparkwire.gateway.transport.lean_server_protocol import PER_CONNECTION, LeanServerProtocol, deflate_factories

LOG = logging.getLogger("test.lean")
IMMUTABLE = (type(None), bool, int, float, str, bytes, tuple, frozenset, enum.Enum, uuid.UUID, logging.Logger)


def text_frame(text: str) -> bytes:
    """A masked client text frame with a zero key (the payload unchanged)."""
    payload = text.encode()
    return b"\x81" + bytes([0x80 | len(payload)]) + b"\0\0\0\0" + payload


@pytest.mark.parametrize("deflate", [False, True])
def test_a_copy_has_every_attribute_the_constructor_sets_with_its_value(deflate: bool) -> None:
    made = ServerProtocol(extensions=deflate_factories() if deflate else [], max_size=65536, logger=LOG,
                          state=State.OPEN)
    copied = LeanServerProtocol.open(deflate=deflate, max_size=65536, logger=LOG)
    assert set(vars(copied)) == set(vars(made)) - {"id"}  # its id is drawn when read
    for name, value in vars(made).items():
        if name in PER_CONNECTION or name == "id":
            continue
        if name == "available_extensions":
            assert [vars(factory) for factory in value] == [vars(factory) for factory in vars(copied)[name]]
        else:
            assert vars(copied)[name] == value, name
    assert copied.state is State.OPEN and isinstance(copied.id, uuid.UUID)


def test_two_connections_share_nothing_mutable_and_parse_their_own_frames() -> None:
    first = LeanServerProtocol.open(deflate=False, max_size=65536, logger=LOG)
    second = LeanServerProtocol.open(deflate=False, max_size=65536, logger=LOG)
    for name, value in vars(first).items():
        if not isinstance(value, IMMUTABLE) and name != "available_extensions":
            assert vars(second)[name] is not value, name
    assert first.id != second.id
    first.receive_data(text_frame("one"))
    second.receive_data(text_frame("tw"))
    assert first.events_received() == [Frame(Opcode.TEXT, b"one")]
    assert second.events_received() == [Frame(Opcode.TEXT, b"tw")]
