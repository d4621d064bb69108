"""Why a connection ends: each ending of a subscription closes with its code."""

from __future__ import annotations

import typing

import pytest

from sparkwire.gateway.connection.ending import ENDINGS, Close
from sparkwire.gateway.fanout.subscription import EndReason
from sparkwire.protocol.close_codes import CloseCode


@pytest.mark.parametrize(("name", "code"), [
    ("slow_consumer", CloseCode.SLOW_CONSUMER), ("stream_reset", CloseCode.STREAM_RESET),
    ("draining", CloseCode.GOING_AWAY), ("timeout", CloseCode.TIMEOUT), ("token_expired", CloseCode.TOKEN_EXPIRED),
    ("receiver", CloseCode.INTERNAL_ERROR), (None, CloseCode.INTERNAL_ERROR),  # no error of the receiver kept
])
def test_each_ending_of_a_subscription_closes_with_its_code(name: str | None, code: CloseCode) -> None:
    assert Close.for_ending(name).code is code


def test_every_ending_a_subscription_can_have_is_mapped() -> None:
    assert set(typing.get_args(EndReason)) - {"receiver"} == set(ENDINGS)
