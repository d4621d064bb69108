"""The second transport: the same connection over Server-Sent Events, for clients behind proxies that block
WebSockets. Same frames, same handshake, sender and receiver, same close codes; only the socket differs.

``POST /sse?stream=S`` with the hello frame as its body answers ``text/event-stream``: every server frame is
one event (``data: <frame>``); the end is a ``close`` event (``data: {"code": 4xxx, "reason": "…"}``), after
which the response ends. The response's ``X-Sparkwire-Connection`` header names the connection.

``POST /sse/frames?connection=ID`` carries the client's frames (acks, pings, pongs; one per line) to that
connection: 204. They must reach the pod holding it, so an ingress keeps a client on one pod (session
affinity, as SignalR's and Socket.IO's HTTP transports need): the JS client sends one
``X-Sparkwire-Affinity`` value on both requests for proxies that hash on it, and a cookie-based affinity
works too. A connection not on this pod (ended, or the request went elsewhere) answers 404: the client
reconnects and resumes from its cursor, as after any lost connection. The connection id is a 128-bit
random capability; holding it is what lets a client post to a connection.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.datastructures import Headers, QueryParams
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from sparkwire.gateway.ending import refuse
from sparkwire.gateway.wire import Inbox, Listener, Message, Replies
from sparkwire.protocol.close_codes import CloseCode, close_reason
from sparkwire.protocol.limits import MAX_CLIENT_MESSAGE_BYTES

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

    def write(self, frames: bytes) -> bool:
        return False  # WebSocket frames: not for this socket; the sender sends every batch itself

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


Refusal = tuple[CloseCode, str]
ServeSocket = Callable[[SseSocket, str], Awaitable[None]]


class AsgiRoute:
    """A plain ASGI callable: what Starlette's ``Route`` takes as an application rather than as a
    request -> response function (which a bound method would be taken for)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class SseEndpoints:
    """The two routes' ASGI applications (``stream_route``, ``frames_route``), over the pod's live SSE
    connections."""

    def __init__(self, refusal: Callable[[str | None, str], Refusal | None], serve: ServeSocket) -> None:
        self.refusal = refusal  # (origin, stream) -> why this pod does not take the connection, or None
        self.serve = serve  # runs a connection on the socket until it ends
        self.sockets: dict[str, SseSocket] = {}
        self.stream_route = AsgiRoute(self.stream)
        self.frames_route = AsgiRoute(self.frames)

    async def stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /sse?stream=S``, the hello as the body."""
        if scope["method"] != "POST":
            return await _answer(send, 405, {"error": "POST the hello"})
        headers = Headers(scope=scope)
        body = await _read_body(receive, MAX_CLIENT_MESSAGE_BYTES)
        socket = SseSocket(send, "" if body is None else body.decode("utf-8", "replace"), uuid.uuid4().hex)
        stream = QueryParams(scope.get("query_string", b"")).get("stream", "")
        refused = self.refusal(headers.get("origin"), stream)
        if body is None:
            refused = (CloseCode.MESSAGE_TOO_BIG, f"a hello over {MAX_CLIENT_MESSAGE_BYTES} bytes")
        if refused is not None:
            await refuse(socket, *refused)  # the close as the WebSocket route sends it, counted alike
            socket.release()
            return
        self.sockets[socket.connection_id] = socket
        watcher = asyncio.get_running_loop().create_task(_watch_disconnect(receive, socket))
        try:
            await self.serve(socket, stream)
        finally:
            watcher.cancel()
            self.sockets.pop(socket.connection_id, None)
            socket.release()

    async def frames(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /sse/frames?connection=ID``, frames one per line."""
        if scope["method"] != "POST":
            return await _answer(send, 405, {"error": "POST the frames"})
        connection = QueryParams(scope.get("query_string", b"")).get("connection", "")
        body = await _read_body(receive, MAX_CLIENT_MESSAGE_BYTES)
        socket = self.sockets.get(connection)
        if body is None:
            return await _answer(send, 413, {"error": f"over {MAX_CLIENT_MESSAGE_BYTES} bytes"})
        if socket is None or socket.closed:
            return await _answer(send, 404, {"error": "no such connection on this pod: reconnect and resume"})
        for line in body.decode("utf-8", "replace").split("\n"):
            if line.strip() and not socket.posted(line):
                return await _answer(send, 429, {"error": "frames posted faster than the connection starts"})
        await _answer(send, 204, None)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body; None when it is over ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _watch_disconnect(receive: Receive, socket: SseSocket) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    socket.client_left()


async def _answer(send: Send, status: int, body: Mapping[str, Any] | None) -> None:
    data = b"" if body is None else json.dumps(body).encode()
    headers = [(b"content-type", b"application/json")] if body is not None else []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
