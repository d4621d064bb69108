"""``/ws``: a WebSocket connection let in (or turned away before its handshake), then served on the transport
its server gives it: sparkwire's uvicorn ``Wire`` (live batches written straight through) or plain ASGI."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import unquote_plus

from starlette.datastructures import Headers
from starlette.websockets import WebSocket

from sparkwire.gateway.transport.asgi import AsgiTransport
from sparkwire.gateway.transport.closing import turn_away
from sparkwire.gateway.transport.contract import FrameSocket, Transport
from sparkwire.gateway.transport.sse_routes import WhyTurnAway
from sparkwire.gateway.transport.wire import wire_of

# (socket, its transport, stream) -> runs the connection until it ends.
ServeWebSocket = Callable[[FrameSocket, Transport, str], Awaitable[None]]


class WebSocketEndpoint:
    """The ``/ws`` endpoint (``handle``), over the pod's two decisions: whether it takes a connection, and serving
    it. A bound method, so that Starlette's ``WebSocketRoute`` takes it for an endpoint, not an ASGI app."""

    def __init__(self, why_turn_away: WhyTurnAway, serve: ServeWebSocket) -> None:
        self.why_turn_away = why_turn_away
        self.serve = serve

    async def handle(self, websocket: WebSocket) -> None:
        # Parsed here, not through ``websocket.query_params``, which keeps its parse for the connection's lifetime.
        stream = query_value(websocket.scope["query_string"], "stream")
        why = self.why_turn_away(handshake_origin(websocket), stream)
        if why is not None:
            await websocket.accept()  # accept first: a close code is only visible to a client on an open socket
            await turn_away(websocket, why)
            return
        # uvicorn with sparkwire's protocol (`sparkwire gateway`): live batches written straight through;
        # any other ASGI server, or Starlette's TestClient: plain ASGI.
        transport = wire_of(websocket.scope) or AsgiTransport(websocket)
        await websocket.accept()
        await self.serve(websocket, transport, stream)


def query_value(query_string: bytes, name: str) -> str:
    """``QueryParams(query_string).get(name, "")`` (the last value wins), without the multidict Starlette
    builds: ~4 % of a handshake's CPU when thousands connect at once."""
    found = ""
    for part in query_string.decode("latin-1").split("&"):
        key, _, value = part.partition("=")
        if _unquoted(key) == name:
            found = _unquoted(value)
    return found


def _unquoted(text: str) -> str:
    return unquote_plus(text) if "%" in text or "+" in text else text


def handshake_origin(websocket: WebSocket) -> str | None:
    """The request's Origin (its first value, as Starlette's ``Headers.get``). The headers are read only
    here: an idle connection does not keep them (about 1 KB per connection, 5 % of its memory)."""
    raw = websocket.scope.get("headers")
    if not isinstance(raw, list):
        return Headers(scope=websocket.scope).get("origin")
    origin = next((value.decode("latin-1") for name, value in raw if name == b"origin"), None)
    raw.clear()
    return origin
