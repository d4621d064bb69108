"""A bare client of the SSE transport (docs/protocol.md, "Server-Sent Events"): the hello posted, every event
of the response read as it comes, client frames posted to the connection. For tests that need to see the
server's frames exactly as sent."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

CONNECTION_HEADER = "x-sparkwire-connection"


@dataclass
class SseConversation:
    """What one SSE connection received: its frames in order, and its close event (None while open)."""

    http: httpx2.AsyncClient
    base: str
    connection: str = ""
    frames: list[dict[str, Any]] = field(default_factory=list)
    close: dict[str, Any] | None = None

    @property
    def seqs(self) -> list[int]:
        return [e["seq"] for frame in self.frames if frame["type"] == "entries" for e in frame["entries"]]

    async def post(self, *frames: str | dict[str, Any]) -> int:
        """Post client frames to this connection; the HTTP status."""
        body = "\n".join(f if isinstance(f, str) else json.dumps(f) for f in frames)
        answer = await self.http.post(f"{self.base}/sse/frames", params={"connection": self.connection},
                                      content=body)
        return answer.status_code


async def events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) of each event of a ``text/event-stream``."""
    name, data = "message", []
    async for line in lines:
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


@contextlib.asynccontextmanager
async def sse_connection(
    base: str, stream: str, hello: dict[str, Any] | str, headers: dict[str, str] | None = None
) -> AsyncIterator[tuple[SseConversation, asyncio.Task[None]]]:
    """An open SSE connection whose frames a background task collects; closed on exit."""
    body = hello if isinstance(hello, str) else json.dumps({"type": "hello", "v": 1, **hello})
    # trust_env=False: tests talk to servers here, never through a proxy from the environment.
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None), trust_env=False) as http:
        conversation = SseConversation(http, base)
        opened = asyncio.get_running_loop().create_future()

        async def read() -> None:
            async with http.stream("POST", f"{base}/sse", params={"stream": stream}, content=body,
                                   headers=headers or {}) as response:
                conversation.connection = response.headers.get(CONNECTION_HEADER, "")
                opened.set_result(response.status_code)
                async for name, data in events(response.aiter_lines()):
                    if name == "close":
                        conversation.close = json.loads(data)
                    else:
                        conversation.frames.append(json.loads(data))

        task = asyncio.create_task(read())
        await asyncio.wait_for(asyncio.shield(opened), 10)
        try:
            yield conversation, task
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def until(condition: Any, task: asyncio.Task[None], timeout: float = 10) -> None:
    """Until ``condition()`` holds (or the response ended and it still does not: fails)."""
    async with asyncio.timeout(timeout):
        while not condition():
            if task.done():
                assert condition(), f"the response ended first: {task.exception() if not task.cancelled() else ''}"
            await asyncio.sleep(0.02)
