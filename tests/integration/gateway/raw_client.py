"""A bare protocol client for tests that need to see frames exactly as the server sends them."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed


@dataclass
class Received:
    welcome: dict[str, Any] | None = None
    snapshot_seq: int | None = None
    seqs: list[int] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    close_code: int | None = None


async def open_session(url: str, hello: dict[str, Any]) -> ClientConnection:
    ws = await connect(url, open_timeout=5)
    await ws.send(json.dumps({"type": "hello", "v": 1, **hello}))
    return ws


async def collect(ws: ClientConnection, received: Received, *, until_seq: int, timeout: float = 10) -> Received:
    """Read frames until ``until_seq`` was delivered, the server closes, or ``timeout`` passes."""
    async def loop() -> None:
        while not received.seqs or received.seqs[-1] < until_seq:
            frame = json.loads(await ws.recv())
            if frame["type"] == "welcome":
                received.welcome = frame
            elif frame["type"] == "snapshot":
                received.snapshot_seq = frame["seq"]
            elif frame["type"] == "entries":
                received.seqs.extend(entry["seq"] for entry in frame["entries"])
            elif frame["type"] == "error":
                received.errors.append(frame)

    try:
        await asyncio.wait_for(loop(), timeout)
    except TimeoutError:
        pass  # the caller checks what arrived
    except ConnectionClosed as closed:
        received.close_code = closed.rcvd.code if closed.rcvd else None
    return received


async def closed_with(url: str, frames: list[str | bytes], timeout: float = 5) -> tuple[int | None, list[str]]:
    """Send ``frames`` on a new connection; the close code the server answered with and its text frames."""
    texts: list[str] = []
    async with connect(url, open_timeout=5) as ws:
        try:
            for frame in frames:
                await ws.send(frame)
            async with asyncio.timeout(timeout):
                while True:
                    message = await ws.recv()
                    texts.append(message if isinstance(message, str) else message.decode())
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else None), texts
    return None, texts
