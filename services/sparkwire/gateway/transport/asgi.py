"""A connection's ``Transport`` under any ASGI server but sparkwire's uvicorn protocol (or Starlette's
``TestClient``): plain ASGI ``send`` and ``receive``, no direct path."""

from __future__ import annotations

import asyncio

from starlette.websockets import WebSocket, WebSocketState

from sparkwire.gateway.transport.contract import Lane, Listener, Message
from sparkwire.gateway.transport.queues import Replies


class AsgiTransport:
    """A ``Transport`` over plain ASGI: no direct writes (``write`` declines, so live batches go through the
    connection's task), pongs sent by a task of their own, and the client's messages read by a task that
    hands them to the listener. Per connection it costs that task; the uvicorn ``Wire`` costs none."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self._reader: asyncio.Task[None] | None = None
        self._replies = Replies(websocket.send_text)

    def lane(self) -> Lane | None:
        return None

    def write(self, frames: bytes) -> bool:
        return False

    def reply(self, text: str) -> bool:
        return self.websocket.application_state == WebSocketState.CONNECTED and self._replies.send(text)

    def listen(self, listener: Listener | None) -> None:
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None
        if listener is not None:
            self._reader = asyncio.get_running_loop().create_task(self._read(listener))

    async def _read(self, listener: Listener) -> None:
        while True:
            message: Message = dict(await self.websocket.receive())
            listener(message)
            if message["type"] == "websocket.disconnect":
                return
