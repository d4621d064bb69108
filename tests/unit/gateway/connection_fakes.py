"""A socket and a transport that record what a connection's parts do with them, the settings those parts
get, and a stream hub over the in-memory log: enough to run each part alone, with no server."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from starlette.websockets import WebSocket
from websockets.frames import Frame
from websockets.streams import StreamReader

from sparkwire.gateway.connection.ack_budget import AckBudget
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.transport.contract import Lane, Listener, Message
from sparkwire.protocol import ServerFrame, parse_server_frame
from sparkwire.replaylog.memory import MemoryStreamLog
from sparkwire.replaylog.model import Record

STREAM = "metrics"


class FakeSocket:
    """What a connection calls on its Starlette ``WebSocket``; ``send_text`` blocks forever with ``stuck``."""

    def __init__(self, *incoming: str, stuck: bool = False) -> None:
        self.incoming: asyncio.Queue[Message] = asyncio.Queue()
        for text in incoming:
            self.incoming.put_nowait({"type": "websocket.receive", "text": text})
        self.sent: list[str] = []
        self.closed: tuple[int, str] | None = None
        self.stuck = stuck

    async def receive(self) -> Message:
        return await self.incoming.get()

    async def send_text(self, text: str) -> None:
        if self.stuck:
            await asyncio.Event().wait()
        self.sent.append(text)

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        self.closed = (code, reason or "")

    def frames(self) -> list[ServerFrame]:
        return [parse_server_frame(text) for text in self.sent]

    def entry_seqs(self) -> list[int]:
        return [entry["seq"] for text in self.sent if json.loads(text).get("type") == "entries"
                for entry in json.loads(text)["entries"]]

    def as_websocket(self) -> WebSocket:
        return cast(WebSocket, self)


class FakeWire:
    """A ``Transport`` that records pongs, ``accepts`` says whether a reply can go; with no direct path (as
    plain ASGI), or with ``direct`` one that records the frames written; ``lane``: its lane for the hub."""

    def __init__(self, accepts: bool = True, direct: bool = False, lane: Lane | None = None) -> None:
        self.accepts = accepts
        self.direct = direct
        self._lane = lane
        self.written: list[list[str]] = []  # the texts of each direct write
        self.replies: list[str] = []
        self.listener: Listener | None = None

    def lane(self) -> Lane | None:
        return self._lane

    def write(self, frames: bytes) -> bool:
        if self.direct:
            self.written.append(frame_texts(frames))
        return self.direct

    def reply(self, text: str) -> bool:
        if self.accepts:
            self.replies.append(text)
        return self.accepts

    def listen(self, listener: Listener | None) -> None:
        self.listener = listener


class FakeGate:
    """A lane's gate (``Writable.open`` on a real socket)."""

    def __init__(self) -> None:
        self.open = True


class FakeDirectWrites:
    """A lane's transport: records what the hub wrote; ``closing`` and ``fails`` as a socket going away."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closing = False
        self.fails = False

    def write(self, data: bytes) -> None:
        if self.fails:
            raise RuntimeError("socket gone")
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing


def fake_lane() -> tuple[Lane, FakeGate, FakeDirectWrites]:
    """A lane for the hub, with its gate and transport to change and inspect."""
    gate, transport = FakeGate(), FakeDirectWrites()
    return Lane(gate, transport), gate, transport


def frame_texts(data: bytes) -> list[str]:
    """The texts of serialized server frames, back to back."""
    reader = StreamReader()
    reader.feed_data(data)
    texts: list[str] = []
    while reader.buffer:
        parser = Frame.parse(reader.read_exact, mask=False)
        try:
            next(parser)
        except StopIteration as parsed:
            texts.append(parsed.value.data.decode())
        else:
            raise AssertionError("a frame cut short")
    return texts


def settings(**changes: Any) -> ConnectionSettings:
    values: dict[str, Any] = {
        "ack_every": 10, "ack_interval_ms": 1000, "hello_timeout_s": 5.0, "max_client_frame_bytes": 8192,
        "max_server_frame_bytes": 1 << 20, "page_size": 8, "auth_secret": "",
    }
    return ConnectionSettings(**{**values, **changes})


def budget(config: ConnectionSettings | None = None) -> AckBudget:
    """A stream's ack budget, as the pod holds one per stream (``settings()``'s by default)."""
    return AckBudget(config or settings())


async def hub_with(entries: int) -> StreamHub:
    """A hub (not running: no live feed) over an in-memory log holding ``entries`` results, one key per five."""
    log = MemoryStreamLog()
    if entries:
        await log.commit([Record(f"r{n}", f"k{n % 5}", json.dumps({"n": n})) for n in range(1, entries + 1)])
    hub = StreamHub(log, STREAM, ring_size=16)
    hub.epoch = log.epoch
    return hub
