"""The routes of the SSE transport (``sse.SseSocket``), for clients behind proxies that block WebSockets.

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
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from starlette.datastructures import Headers, QueryParams
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from sparkwire.gateway.transport.closing import TurnAway, turn_away
from sparkwire.gateway.transport.sse import AFFINITY_HEADER, CONNECTION_HEADER, SseSocket
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.limits import MAX_CLIENT_MESSAGE_BYTES

# (origin, stream) -> why the pod does not take a new connection, or None.
WhyTurnAway = Callable[[str | None, str], TurnAway | None]
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

    def __init__(self, why_turn_away: WhyTurnAway, serve: ServeSocket) -> None:
        self.why_turn_away = why_turn_away  # (origin, stream) -> why this pod does not take the connection, or None
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
        why = self.why_turn_away(headers.get("origin"), stream)
        if body is None:
            why = TurnAway(CloseCode.MESSAGE_TOO_BIG, f"a hello over {MAX_CLIENT_MESSAGE_BYTES} bytes")
        if why is not None:
            await turn_away(socket, why)  # the close as the WebSocket route sends it, counted alike
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


def cross_origin(app: ASGIApp, allowed_origins: Collection[str]) -> ASGIApp:
    """A page of another origin may use SSE as it may open a WebSocket: its preflight (the affinity header
    makes one) is answered for the allowed origins (any, without an allow-list; the hello's token, not
    the origin, decides who reads), and the connection header is exposed to it."""
    return CORSMiddleware(app, allow_origins=sorted(allowed_origins) or ["*"], allow_methods=["POST"],
                          allow_headers=["content-type", AFFINITY_HEADER], expose_headers=[CONNECTION_HEADER])
