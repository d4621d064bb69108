"""How a close is sent: an error frame first when the client caused it, and the close bounded in time even on
a socket that no longer drains."""

from __future__ import annotations

import asyncio
import json

import pytest

from sparkwire.gateway.transport import closing
from sparkwire.gateway.transport.closing import send_close
from sparkwire.protocol.close_codes import CloseCode

from ..connection_fakes import FakeSocket


def test_a_close_the_client_caused_sends_an_error_frame_with_the_reason_first() -> None:
    socket = FakeSocket()
    asyncio.run(send_close(socket.as_websocket(), CloseCode.PROTOCOL_VIOLATION, "an ack of seq 9 outside 0..4"))
    assert [json.loads(text) for text in socket.sent] == [
        {"type": "error", "code": int(CloseCode.PROTOCOL_VIOLATION), "name": "protocol_violation",
         "reason": "an ack of seq 9 outside 0..4"}]
    assert socket.closed == (CloseCode.PROTOCOL_VIOLATION, "an ack of seq 9 outside 0..4")


def test_a_close_the_server_caused_has_no_error_frame() -> None:
    socket = FakeSocket()
    asyncio.run(send_close(socket.as_websocket(), CloseCode.GOING_AWAY, "pod draining"))
    assert socket.sent == [] and socket.closed == (CloseCode.GOING_AWAY, "pod draining")


def test_an_error_frame_stuck_behind_unread_data_does_not_hold_the_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(closing, "ERROR_FRAME_TIMEOUT_S", 0.05)
    socket = FakeSocket(stuck=True)
    asyncio.run(asyncio.wait_for(send_close(socket.as_websocket(), CloseCode.TIMEOUT, "no frame"), 2))
    assert socket.closed == (CloseCode.TIMEOUT, "no frame")
