"""How a connection's close is sent, whatever its transport: an ``error`` frame first when the client caused
it, then the close, each bounded in time; and turning a connection away before its handshake."""

from __future__ import annotations

import asyncio
import contextlib
from typing import NamedTuple

from sparkwire.gateway import metrics
from sparkwire.gateway.transport.contract import FrameSocket
from sparkwire.protocol.close_codes import CloseCode, close_reason
from sparkwire.protocol.server_frames import encode_error

# How long a close frame may wait behind data the client has not read yet (a slow consumer that wakes up
# reads its backlog, then the close code) before the connection is dropped without it.
CLOSE_TIMEOUT_S = 5.0
# How long the ``error`` frame before a close the client caused may wait; the close is sent either way.
ERROR_FRAME_TIMEOUT_S = 1.0


class TurnAway(NamedTuple):
    """Why a pod does not take a new connection (origin, stream, draining, size): the close it gets before
    its handshake."""

    code: CloseCode
    reason: str


async def send_close(socket: FrameSocket, code: CloseCode, reason: str) -> None:
    """The close frame (after an ``error`` frame when ``code`` says so), each bounded in time; never raises."""
    if code.error_frame_first:  # behind unread data (a slow or silent client) it may not go out in time
        with contextlib.suppress(Exception):
            async with asyncio.timeout(ERROR_FRAME_TIMEOUT_S):
                await socket.send_text(encode_error(code, reason))
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await socket.close(code=int(code), reason=close_reason(reason))


async def turn_away(socket: FrameSocket, why: TurnAway) -> None:
    """Turn a connection away before its handshake: the close, counted in ``sparkwire_gateway_closes_total``
    as every close the server sends, whatever the transport."""
    await send_close(socket, why.code, why.reason)
    metrics.child(metrics.CLOSES, str(int(why.code))).inc()
