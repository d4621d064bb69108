"""A connection's mailbox: the live batches the hub hands it, and why it must end.

One plain list and, only while the connection waits, one future: a connection costs no queue, events or
tasks of its own for these (asyncio.Queue and Event allocate several deques each; at thousands of idle
connections that was a third of their memory). Whoever must end a connection — the hub on overflow or a
new epoch, the pod draining, its own receiver, its own timers — calls ``end``, which wakes the sender.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from sparkwire.gateway.transport.contract import serialize_text_frames
from sparkwire.protocol.server_frames import EncodedEntry, pack_entries
from sparkwire.protocol.view_feed import CompiledView, ViewFrame, ViewItem, encode_view_frame, view_items
from sparkwire.replaylog.model import Entry

log = logging.getLogger(__name__)

EndReason = Literal["slow_consumer", "stream_reset", "stream_rewound", "draining", "receiver", "timeout",
                    "token_expired"]


@dataclass(frozen=True, slots=True)
class LiveEntry:
    entry: Entry
    encoded: EncodedEntry


class Subscription:
    """At most ``limit`` batches wait; one more ends the connection as a slow consumer (resumable) rather
    than slowing the hub or the other connections.

    ``write_through``, when the connection has one, is tried first while the connection sits idle waiting
    for its next batch: it sends the batch itself (``transport.uvicorn_websocket``) and returns True, or False
    and the batch waits here for the connection's task as usual."""

    __slots__ = ("_batches", "_waiter", "ended", "limit", "write_through")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.ended: EndReason | None = None
        self.write_through: Callable[[LiveBatch], int | None] | None = None
        self._batches: list[LiveBatch] = []
        self._waiter: asyncio.Future[None] | None = None

    def offer(self, batch: LiveBatch) -> int | None:
        """Hand ``batch`` over; the entries delivered if it was written through (0: a filtered connection's
        view had none of it), None if it waits for the connection's task."""
        if self.ended is not None:
            return None
        if self._waiter is not None and not self._batches and self.write_through is not None:
            try:
                delivered = self.write_through(batch)
                if delivered is not None:
                    return delivered
            except Exception:  # the hub must go on serving everyone else; this batch takes the usual path
                log.exception("writing a batch through failed")
                self.write_through = None
        if len(self._batches) >= self.limit:
            self.end("slow_consumer")
            return None
        self._batches.append(batch)
        self._wake()
        return None

    def end(self, reason: EndReason) -> None:
        """The first reason wins: it is what the connection closes with."""
        if self.ended is None:
            self.ended = reason
            self._wake()

    def take(self) -> list[LiveBatch]:
        """Every batch waiting, oldest first, now."""
        batches, self._batches = self._batches, []
        return batches

    async def wait(self, timeout_s: float) -> None:
        """Until a batch arrives, the subscription ends, or ``timeout_s`` passes."""
        if self._batches or self.ended is not None:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(max(timeout_s, 0.0), _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def nudge(self) -> None:
        """Wake the connection's task without a batch: its timers changed while it waited (a written-through
        batch left a filtered connection's position frame due), so it waits again until the new time."""
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            _resolve(self._waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class LiveBatch(list[LiveEntry]):
    """One XREAD's entries as the hub fans them out. Connections that take the whole batch (the usual case
    once caught up) share its packed frames, and their serialized bytes: built once per pod and epoch, not
    once per client."""

    def __init__(self, entries: Sequence[LiveEntry] = ()) -> None:
        super().__init__(entries)
        self._frames: dict[tuple[str, int], list[str]] = {}
        self._wire: dict[tuple[str, int], bytes] = {}
        self._view_items: dict[int, tuple[CompiledView, tuple[ViewItem, ...]]] = {}
        self._view_wire: dict[tuple[int, str, int, int], tuple[CompiledView, bytes]] = {}

    @cached_property  # asked by every connection; the hub never changes a batch once it offers it
    def run(self) -> tuple[int, int] | None:
        """(first seq, last seq) when the batch is consecutive seqs in order, else None."""
        if not self or any(self[i].entry.seq != self[0].entry.seq + i for i in range(1, len(self))):
            return None
        return self[0].entry.seq, self[-1].entry.seq

    def wire(self, epoch: str, max_frame_bytes: int) -> bytes:
        """``frames`` as WebSocket frame bytes, for ``Wire.write``."""
        data = self._wire.get((epoch, max_frame_bytes))
        if data is None:
            data = self._wire[(epoch, max_frame_bytes)] = serialize_text_frames(self.frames(epoch, max_frame_bytes))
        return data

    def view_items(self, view: CompiledView, data_of: Callable[[Entry], object]) -> tuple[ViewItem, ...]:
        """What of this batch an append stream's ``view`` delivers (``view_feed.view_items``): evaluated by
        the first of the view's connections to ask, shared by the rest (issue 43's shared evaluation)."""
        found = self._view_items.get(id(view))
        if found is None or found[0] is not view:  # the view is kept with its items: an id is never reused
            found = self._view_items[id(view)] = (view, view_items(view, [live.entry for live in self], data_of))
        return found[1]

    def view_wire(self, view: CompiledView, epoch: str, frame: ViewFrame, max_frame_bytes: int) -> bytes:
        """``frame`` (this whole batch as ``view`` sees it, from ``frame.after``) as WebSocket frame bytes:
        built once for the view's connections at the same position, which is all of them while they keep up."""
        key = (id(view), epoch, frame.after, max_frame_bytes)
        found = self._view_wire.get(key)
        if found is None or found[0] is not view:
            first = self[0].entry.seq
            encoded = {item.entry.seq: self[item.entry.seq - first].encoded for item in frame.items}
            texts = encode_view_frame(epoch, frame, lambda item: encoded[item.entry.seq], max_frame_bytes)
            found = self._view_wire[key] = (view, serialize_text_frames(texts))
        return found[1]

    def frames(self, epoch: str, max_frame_bytes: int) -> list[str]:
        packed = self._frames.get((epoch, max_frame_bytes))
        if packed is None:
            packed = self._frames[(epoch, max_frame_bytes)] = pack_entries(
                epoch, [live.encoded for live in self], max_frame_bytes)
        return packed
