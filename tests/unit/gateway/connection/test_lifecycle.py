"""``connection.release``: the error that ended a connection lets go of the connection's frames, so what it
left behind is freed by reference counting; an error shared by several connections stays usable."""

from __future__ import annotations

import asyncio
import weakref

import pytest

from sparkwire.gateway.auth.tokens import AuthError
from sparkwire.gateway.connection.lifecycle import release
from sparkwire.gateway.store.batched import shared
from sparkwire.protocol.close_codes import CloseCode


class Holder:
    """Keeps the error it saw, as the receiver does."""

    error: BaseException | None = None


def fail_into(holder: Holder) -> None:
    try:
        raise ConnectionError("client gone")
    except ConnectionError as error:
        holder.error = error
    try:
        raise holder.error
    except ConnectionError:
        raise RuntimeError("while closing") from None


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("released", [False, True])
def test_a_released_error_no_longer_keeps_the_frames_that_hold_it(released: bool) -> None:
    holder = Holder()
    gone = weakref.ref(holder)
    try:
        fail_into(holder)
    except RuntimeError as error:
        assert isinstance(error.__context__, ConnectionError)
        if released:
            release(error)
            assert error.__traceback__ is None and error.__context__.__traceback__ is None
    del holder
    assert (gone() is None) is released  # without release: a cycle only the collector frees


def test_a_frozen_error_is_released_too() -> None:
    try:
        raise AuthError(CloseCode.TOKEN_EXPIRED, "token expired")
    except AuthError as error:
        release(error)
        assert error.__traceback__ is None


def test_an_error_shared_by_a_round_trip_is_released_by_one_caller_and_still_raised_to_the_others() -> None:
    async def run() -> tuple[list[str], int]:
        reads = 0

        async def read() -> int:
            nonlocal reads
            reads += 1
            await asyncio.sleep(0.01)
            if reads == 1:
                raise ConnectionError("store down")
            return reads

        meta = shared(read)
        seen: list[str] = []

        async def caller() -> None:
            try:
                await meta(None)
            except ConnectionError as error:
                seen.append("traceback" if error.__traceback__ is not None else "none")
                release(error)
                await asyncio.sleep(0)  # the others raise it meanwhile

        await asyncio.gather(*(caller() for _ in range(3)))
        return seen, await meta(None)

    seen, after = asyncio.run(run())
    assert seen == ["traceback"] * 3
    assert after == 2  # the round trips go on
