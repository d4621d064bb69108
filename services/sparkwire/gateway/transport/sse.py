"""The second transport: the same connection over Server-Sent Events, for clients behind proxies that block
WebSockets. Same frames, same handshake, sender and receiver, same close codes; only the socket differs.

This module is the socket (``SseSocket``); its two routes, ``POST /sse`` and ``POST /sse/frames``, are
``sse_routes``.
"""

from __future__ import annotations

import json

from starlette.types import Send
from starlette.websockets import WebSocketDisconnect

from sparkwire.gateway.transport.contract import Lane, Listener, Message
from sparkwire.gateway.transport.queues import Inbox, Replies
from sparkwire.protocol.close_codes import close_reason

CONNECTION_HEADER = "x-sparkwire-connection"
AFFINITY_HEADER = "x-sparkwire-affinity"  # sent by the client for proxies that keep it on one pod
_EVENT_STREAM_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    # nginx (and ingress-nginx) would otherwise buffer the response and hold frames back.
    (b"x-accel-buffering", b"no"),
]
# Frames a client may post before its connection starts listening (while its welcome goes out).
_MAX_EARLY_FRAMES = 64


def event(text: str, name: str | None = None) -> bytes:
    """``text`` as one Server-Sent Event (every line a ``data:`` field, as the format requires)."""
    head = f"event: {name}\n" if name else ""
    return (head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n").encode()


class SseSocket:
    """One SSE connection as the connection's socket (``receive`` gives the posted hello, ``send_text`` an
    event, ``close`` the close event) and as its ``Transport`` (no direct writes; pongs sent by a task;
    posted frames handed to the listener)."""

    def __init__(self, send: Send, hello: str, connection_id: str) -> None:
        self.connection_id = connection_id
        self._send = send
        self._hello: str | None = hello
        self._started = False
        self.closed = False
        self.disconnected = False
        self.inbox = Inbox()
        self._replies = Replies(self.send_text)

    # -- as the connection's socket ---------------------------------------------------------------------

    async def receive(self) -> Message:
        if self._hello is not None:
            hello, self._hello = self._hello, None
            return {"type": "websocket.receive", "text": hello}
        return await self.inbox.get()

    async def send_text(self, data: str) -> None:
        if self.closed or self.disconnected:
            raise WebSocketDisconnect(1001)
        await self._body(event(data), more=True)

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.disconnected:
            text = json.dumps({"code": code, "reason": close_reason(reason or "")}, separators=(",", ":"))
            await self._body(event(text, "close"), more=False)

    async def _body(self, body: bytes, *, more: bool) -> None:
        if not self._started:
            self._started = True
            headers = [*_EVENT_STREAM_HEADERS, (CONNECTION_HEADER.encode(), self.connection_id.encode())]
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        await self._send({"type": "http.response.body", "body": body, "more_body": more})

    # -- as its transport --------------------------------------------------------------------------------

    def lane(self) -> Lane | None:
        return None  # WebSocket frames: not for this socket; the sender sends every batch itself

    def write(self, frames: bytes) -> bool:
        return False

    def reply(self, text: str) -> bool:
        return not (self.closed or self.disconnected) and self._replies.send(text)

    def listen(self, listener: Listener | None) -> None:
        self.inbox.listen(listener)

    # -- from the frames endpoint and the request ---------------------------------------------------------

    def posted(self, text: str) -> bool:
        """A frame the client posted; False when too many wait before the connection listens."""
        if self.inbox.listener is None and len(self.inbox) >= _MAX_EARLY_FRAMES:
            return False
        self.inbox.put_nowait({"type": "websocket.receive", "text": text})
        return True

    def release(self) -> None:
        """Once the connection's task has ended: drop the pongs' sender, which holds ``send_text`` and so this
        socket, a cycle that only a full collection freed (issue 39: ~80 SSE sockets a second under churn
        raised the pod's RSS by steps between full collections). A pong still queued is not sent."""
        self.closed = True
        self._replies = Replies(_gone)

    def client_left(self) -> None:
        self.disconnected = True
        self.inbox.put_nowait({"type": "websocket.disconnect", "code": 1001})


async def _gone(text: str) -> None:
    raise WebSocketDisconnect(1001)
