"""A connection's small queues, without asyncio's deques and events per connection: ``Inbox``, the client's
messages waiting for the connection (or handed straight to its listener), and ``Replies``, the frames (pongs)
a transport with no direct write sends from a task of their own."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from sparkwire.gateway.transport.contract import Listener, Message

# A client that sends frames which need an answer (pings) but never reads the answers would grow its
# connection's buffer without bound: past this many unsent bytes, direct writes are refused.
MAX_BUFFERED_BYTES = 1 << 20


class Replies:
    """Frames (pongs) for a transport with no direct write (SSE, plain ASGI), sent in order by one task of
    their own. Bounded as a direct write is, by the bytes waiting (``MAX_BUFFERED_BYTES``), not by a count:
    a cap of 16 pongs in flight closed an SSE client that posted 17 pings in one body as a slow consumer,
    where a WebSocket takes thousands in one write (issue 39)."""

    __slots__ = ("_pending", "_pending_bytes", "_send_text", "_task")

    def __init__(self, send_text: Callable[[str], Awaitable[None]]) -> None:
        self._send_text = send_text
        self._pending: deque[str] = deque()
        self._pending_bytes = 0
        self._task: asyncio.Task[None] | None = None

    def send(self, text: str) -> bool:
        """Queue ``text``; False (not queued) when the frames waiting already fill the bound."""
        if self._pending_bytes + len(text) > MAX_BUFFERED_BYTES:
            return False
        self._pending.append(text)
        self._pending_bytes += len(text)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._send_pending())
        return True

    async def _send_pending(self) -> None:
        try:
            while self._pending:
                text = self._pending.popleft()
                self._pending_bytes -= len(text)
                try:
                    await self._send_text(text)
                except Exception:  # the connection's own task sees the socket's end
                    self._pending.clear()
                    self._pending_bytes = 0
        finally:
            self._task = None


class Inbox:
    """The protocol's queue of ASGI receive events: a list and, while the application waits, one future;
    or, while a listener is set, straight to it."""

    __slots__ = ("_items", "_waiter", "listener")

    def __init__(self) -> None:
        self._items: list[Message] = []
        self._waiter: asyncio.Future[None] | None = None
        self.listener: Listener | None = None

    def put_nowait(self, message: Message) -> None:
        if self.listener is not None:
            self.listener(message)
            return
        self._items.append(message)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def get(self) -> Message:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.pop(0)

    def empty(self) -> bool:
        return not self._items

    def __len__(self) -> int:
        return len(self._items)

    def listen(self, listener: Listener | None) -> None:
        self.listener = listener
        if listener is not None:
            items, self._items = self._items, []
            for message in items:
                listener(message)
