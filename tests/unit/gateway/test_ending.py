"""How a connection ends: each ending's close code, and the close (with an error frame when the client
caused it) bounded in time even on a socket that no longer drains."""

from __future__ import annotations

import asyncio
import json
import typing

import pytest

from sparkwire.gateway import ending
from sparkwire.gateway.ending import ENDINGS, Close, send_close
from sparkwire.gateway.subscription import EndReason
from sparkwire.protocol.close_codes import CloseCode

from .connection_fakes import FakeSocket


@pytest.mark.parametrize(("name", "code"), [
    ("slow_consumer", CloseCode.SLOW_CONSUMER), ("stream_reset", CloseCode.STREAM_RESET),
    ("draining", CloseCode.GOING_AWAY), ("timeout", CloseCode.TIMEOUT), ("token_expired", CloseCode.TOKEN_EXPIRED),
    ("receiver", CloseCode.INTERNAL_ERROR), (None, CloseCode.INTERNAL_ERROR),  # no error of the receiver kept
])
def test_each_ending_of_a_subscription_closes_with_its_code(name: str | None, code: CloseCode) -> None:
    assert Close.for_ending(name).code is code


def test_every_ending_a_subscription_can_have_is_mapped() -> None:
    assert set(typing.get_args(EndReason)) - {"receiver"} == set(ENDINGS)


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
    monkeypatch.setattr(ending, "ERROR_FRAME_TIMEOUT_S", 0.05)
    socket = FakeSocket(stuck=True)
    asyncio.run(asyncio.wait_for(send_close(socket.as_websocket(), CloseCode.TIMEOUT, "no frame"), 2))
    assert socket.closed == (CloseCode.TIMEOUT, "no frame")
