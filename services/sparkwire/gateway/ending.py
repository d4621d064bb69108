"""How a connection ends: the ``Close`` a handshake, the sender or the receiver raises, the close each ending
of a subscription maps to, and the close itself (an ``error`` frame first when the client caused it)."""

from __future__ import annotations

import asyncio
import contextlib

from sparkwire.gateway import metrics
from sparkwire.gateway.wire import FrameSocket
from sparkwire.protocol.close_codes import CloseCode, close_reason
from sparkwire.protocol.server_frames import encode_error

# How long a close frame may wait behind data the client has not read yet (a slow consumer that wakes up
# reads its backlog, then the close code) before the connection is dropped without it.
CLOSE_TIMEOUT_S = 5.0
# How long the ``error`` frame before a close the client caused may wait; the close is sent either way.
ERROR_FRAME_TIMEOUT_S = 1.0

# How each ending of a subscription (``Subscription.end``) closes the connection; "receiver" is not here:
# what ended the receiver is re-raised instead.
ENDINGS: dict[str, tuple[CloseCode, str]] = {
    "slow_consumer": (CloseCode.SLOW_CONSUMER, "send queue overflowed"),
    "stream_reset": (CloseCode.STREAM_RESET, "stream epoch changed"),
    # The log went back in the same epoch (a lagging replica promoted): a new epoch was declared for it.
    "stream_rewound": (CloseCode.STREAM_RESET, "stream rewound: the log went back, new epoch"),
    "draining": (CloseCode.GOING_AWAY, "pod draining"),
    "timeout": (CloseCode.TIMEOUT, "no frame from the client in time"),
    "token_expired": (CloseCode.TOKEN_EXPIRED, "token expired"),
}


class Close(Exception):
    """End the connection with ``code``; a close the client caused gets an ``error`` frame first."""

    def __init__(self, code: CloseCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason

    @classmethod
    def for_ending(cls, ending: str | None) -> Close:
        code, reason = ENDINGS.get(ending or "", (CloseCode.INTERNAL_ERROR, "connection ended"))
        return cls(code, reason)


async def send_close(websocket: FrameSocket, code: CloseCode, reason: str) -> None:
    """The close frame (after an ``error`` frame when ``code`` says so), each bounded in time; never raises."""
    if code.error_frame_first:  # behind unread data (a slow or silent client) it may not go out in time
        with contextlib.suppress(Exception):
            async with asyncio.timeout(ERROR_FRAME_TIMEOUT_S):
                await websocket.send_text(encode_error(code, reason))
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await websocket.close(code=int(code), reason=close_reason(reason))


async def refuse(socket: FrameSocket, code: CloseCode, reason: str) -> None:
    """Turn a connection away before its handshake (origin, stream, size): the close, counted in
    ``sparkwire_gateway_closes_total`` as every close the server sends, whatever the transport."""
    await send_close(socket, code, reason)
    metrics.CLOSES.labels(code=str(int(code))).inc()
