"""A connection's mailbox: the live batches the hub hands it, and why it must end.

One plain list and, only while the connection waits, one future: a connection costs no queue, events or
tasks of its own for these (asyncio.Queue and Event allocate several deques each; at thousands of idle
connections that was a third of their memory). Whoever must end a connection — the hub on overflow or a
new epoch, the pod draining, its own receiver, its own timers — calls ``end``, which wakes the sender.
"""

from __future__ import annotations

import asyncio
import logging
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from sparkwire.gateway.transport.contract import DirectWrites, Gate, Lane, serialize_text_frames, write_direct
from sparkwire.protocol.server_frames import EncodedEntry, pack_entries
from sparkwire.protocol.view_feed import CompiledView, ViewFrame, ViewItem, encode_view_frame, view_items
from sparkwire.protocol.view_index import items_by_view
from sparkwire.replaylog.model import Entry

log = logging.getLogger(__name__)

EndReason = Literal["slow_consumer", "stream_reset", "stream_rewound", "draining", "receiver", "timeout",
                    "token_expired"]


@dataclass(frozen=True, slots=True)
class LiveEntry:
    entry: Entry
    encoded: EncodedEntry


class Delivered(typing.Protocol):
    """A connection's position (``recovery.junction.ReplayMerger``): the last seq sent, and the run after it."""

    delivered: int

    def take_run(self, first_seq: int, last_seq: int) -> bool: ...


class PolicySource(typing.Protocol):
    """A stream's ack budget on the pod (``connection.ack_budget.AckBudget``): its current policy object."""

    @property
    def policy(self) -> object: ...


class Subscription:
    """At most ``limit`` batches wait; one more ends the connection as a slow consumer (resumable) rather
    than slowing the hub or the other connections.

    While the connection sits idle waiting for its next batch, the batch is written without waking it: by
    its armed lane (``arm_lane``) when the batch is the run due next, else by ``write_through`` when the
    connection has one (it sends the batch itself, ``transport.wire``, and returns the entries
    written, or None); otherwise the batch waits here for the connection's task as usual."""

    __slots__ = ("_batches", "_lane_acks", "_lane_epoch", "_lane_fd", "_lane_frame_bytes", "_lane_gate",
                 "_lane_merger", "_lane_policy", "_lane_transport", "_waiter", "ended", "limit", "offered",
                 "write_through")
    # The lane (``arm_lane``): all set together, or the gate None.
    _lane_gate: Gate | None
    _lane_transport: DirectWrites | None
    _lane_merger: Delivered | None
    _lane_epoch: str
    _lane_acks: PolicySource | None
    _lane_policy: object
    _lane_frame_bytes: int
    _lane_fd: int

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.offered = 0  # the hub's fan-out: the index of the last batch offered here (``sweep.Sweep``)
        self.ended: EndReason | None = None
        self.write_through: Callable[[LiveBatch], int | None] | None = None
        self._batches: list[LiveBatch] = []
        self._waiter: asyncio.Future[None] | None = None
        self.disarm_lane()

    def arm_lane(self, lane: Lane, merger: Delivered, epoch: str, acks: PolicySource, policy: object,
                 max_frame_bytes: int) -> None:
        """Let the hub write the next batches straight to ``lane`` while they continue what ``merger``
        delivered, in ``epoch``, with ``acks``' policy still the one the client has (``policy``), and the
        connection waits idle: the checks of ``write_through`` and ``Wire.write``, on what each would read
        from the connection's own objects, kept here and in the lane's gate. At 10,000 connections that fan-out
        read a dozen objects per connection, and this path a handful (docs/design-notes.md). Armed by the
        sender after each batch it wrote through, so a new ack policy or anything else ``write_through``
        refused sends the next batch its way again."""
        self._lane_gate, self._lane_transport, self._lane_fd = lane.gate, lane.transport, lane.fd
        self._lane_merger, self._lane_epoch, self._lane_acks, self._lane_policy = merger, epoch, acks, policy
        self._lane_frame_bytes = max_frame_bytes

    def disarm_lane(self) -> None:
        self._lane_gate = self._lane_transport = self._lane_merger = self._lane_acks = self._lane_policy = None
        self._lane_epoch, self._lane_frame_bytes, self._lane_fd = "", 0, -1

    def offer(self, batch: LiveBatch) -> int | None:
        """Hand ``batch`` over; the entries delivered if it was written through (0: a filtered connection's
        view had none of it), None if it waits for the connection's task."""
        if self.ended is not None:
            return None
        if self._waiter is not None and not self._batches:
            try:
                gate = self._lane_gate
                if gate is not None and gate.open:
                    run = batch.run
                    merger, transport, acks = self._lane_merger, self._lane_transport, self._lane_acks
                    assert merger is not None and transport is not None and acks is not None  # armed together
                    if (run is not None and run[0] == merger.delivered + 1 and batch.epoch == self._lane_epoch
                            and acks.policy is self._lane_policy and not transport.is_closing()):
                        write_direct(transport, self._lane_fd, batch.wire(self._lane_epoch, self._lane_frame_bytes))
                        merger.take_run(*run)  # counted and timed by the hub, once per batch
                        return len(batch)
                if self.write_through is not None:
                    delivered = self.write_through(batch)
                    if delivered is not None:
                        return delivered
            except Exception:  # the hub must go on serving everyone else; this batch takes the usual path
                log.exception("writing a batch through failed")
                self.write_through = None
                self.disarm_lane()
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
    """One XREAD's entries as the hub fans them out, in the hub's ``epoch`` then. Connections that take the
    whole batch (the usual case once caught up) share its packed frames, and their serialized bytes: built
    once per pod and epoch, not once per client."""

    def __init__(self, entries: Sequence[LiveEntry] = (), epoch: str = "", parts: Sequence[LiveBatch] = ()) -> None:
        """``parts``: the batches this one joins, in order (``sweep.Sweep``), whose views' items it reuses."""
        super().__init__(entries)
        self.epoch = epoch
        self._parts = tuple(parts)
        self._frames: dict[tuple[str, int], list[str]] = {}
        self._wire: dict[tuple[str, int], bytes] = {}
        self._view_items: dict[int, tuple[CompiledView, tuple[ViewItem, ...]]] = {}
        self._indexed = False  # the pod's views were evaluated together (``view_items`` with ``views``)
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

    def view_items(self, view: CompiledView, data_of: Callable[[Entry], object],
                   views: Callable[[], Iterable[CompiledView]] | None = None) -> tuple[ViewItem, ...]:
        """What of this batch an append stream's ``view`` delivers (``view_feed.view_items``): evaluated by
        the first of the view's connections to ask, shared by the rest (issue 43's shared evaluation). With
        ``views`` (the pod's append-mode views now), the first ask of any view evaluates the batch for all
        of them in one pass (``view_index.items_by_view``); a view compiled after that is evaluated alone."""
        found = self._view_items.get(id(view))
        if found is None or found[0] is not view:  # the view is kept with its items: an id is never reused
            # A joined batch takes its parts' items: each entry is matched once per view, however many joined
            # batches it is in (a view's connections offered from different places each get their own join).
            if self._parts:
                found = (view, tuple(item for part in self._parts for item in part.view_items(view, data_of, views)))
            elif views is not None and not self._indexed:
                self._indexed = True
                self._view_items.update(items_by_view(views(), [live.entry for live in self], data_of))
                found = self._view_items.get(id(view))
            if found is None or found[0] is not view:
                found = (view, view_items(view, [live.entry for live in self], data_of))
            self._view_items[id(view)] = found
        return found[1]

    def view_wire(self, view: CompiledView, epoch: str, after: int, items: tuple[ViewItem, ...],
                  max_frame_bytes: int) -> bytes:
        """The frame covering this whole batch for ``view`` from ``after`` (its ``items``, or none: a
        position frame), as WebSocket frame bytes: built once for the view's connections at the same
        position, which is all of them while they keep up."""
        key = (id(view), epoch, after, max_frame_bytes)
        found = self._view_wire.get(key)
        if found is None or found[0] is not view:
            first, last = self[0].entry.seq, self[-1].entry
            encoded = {item.entry.seq: self[item.entry.seq - first].encoded for item in items}
            frame = ViewFrame(after=after, through=last.seq, digest=last.digest, items=items)
            texts = encode_view_frame(epoch, frame, lambda item: encoded[item.entry.seq], max_frame_bytes)
            found = self._view_wire[key] = (view, serialize_text_frames(texts))
        return found[1]

    def frames(self, epoch: str, max_frame_bytes: int) -> list[str]:
        packed = self._frames.get((epoch, max_frame_bytes))
        if packed is None:
            packed = self._frames[(epoch, max_frame_bytes)] = pack_entries(
                epoch, [live.encoded for live in self], max_frame_bytes)
        return packed
