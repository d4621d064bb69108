"""The sending side of a filtered subscription (issue 43; docs/protocol.md, "Filtered subscriptions"): the
``Sender``'s replay and live, the same ``ReplayMerger`` runs, turned into the frames of a ``ViewFeed`` — each
covering ``(after, through]`` of the log, a position frame at most once a second while nothing matches.

A connection without a view never comes here: it keeps the ``Sender``'s path (shared frames, writes through)
without a per-entry cost added.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from sparkwire.gateway import metrics
from sparkwire.gateway.auth.tokens import Grant
from sparkwire.gateway.connection.ack_budget import AckBudget
from sparkwire.gateway.connection.sender import Sender, Timers, replay_encodings
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.fanout.subscription import LiveBatch, LiveEntry, Subscription
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.transport.contract import FrameSocket, Transport
from sparkwire.protocol.limits import VIEW_POSITION_INTERVAL_MS
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import AckPolicy, EncodedEntry, encode_entry
from sparkwire.protocol.view_feed import ViewFeed, ViewFrame, ViewItem, encode_removal, encode_view_frame
from sparkwire.replaylog.model import Entry

# How long the position frame before a deliberate close may wait behind unread data (as an error frame's).
FLUSH_TIMEOUT_S = 1.0


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ViewSender(Sender):
    """A ``Sender`` whose frames are its view's: acks are checked against the last ``through`` sent
    (``delivered``), and live batches wait for the connection's task (no write through)."""

    __slots__ = ("_append_views", "_data_of", "_interval_s", "_last_frame_s", "_view", "_views", "feed")

    def __init__(self, socket: FrameSocket, transport: Transport, hub: StreamHub, subscription: Subscription,
                 settings: ConnectionSettings, timers: Timers, grant: Grant | None, epoch: str, after: int,
                 view: View, interval_ms: int = VIEW_POSITION_INTERVAL_MS, *, acks: AckBudget,
                 acks_sent: AckPolicy | None = None) -> None:
        super().__init__(socket, transport, hub, subscription, settings, timers, grant, epoch, after, acks=acks,
                         acks_sent=acks_sent)
        views = self._views = hub.views
        # Bound once: the hub's fan-out asks them for every batch it writes through this connection.
        self._data_of, self._append_views = views.data_of, views.append_views
        self._view = view
        self._interval_s = interval_ms / 1000
        self._last_frame_s = time.monotonic()
        self.feed = ViewFeed(views.compiled(view), after, now_ms=monotonic_ms(), interval_ms=interval_ms,
                             data_of=views.data_of)

    async def run(self) -> None:
        """As the ``Sender``'s; a pod draining sends a last position frame first (bounded in time), so the
        client's cursor moves past entries its view left out and its resume does not read them again."""
        await super().run()
        if self.subscription.ended == "draining":
            with contextlib.suppress(Exception):
                async with asyncio.timeout(FLUSH_TIMEOUT_S):
                    await self._send_view(self.feed.flush(monotonic_ms()), {})

    @property
    def delivered(self) -> int:
        """The ``through`` of the last frame sent (or the start position): what an ack may reach."""
        return self.feed.sent

    def write_through(self, batch: LiveBatch) -> int | None:
        """As the ``Sender``'s, with the view's frame for the batch: for an append stream's view, when the
        whole batch is the run due next, its items (evaluated once per view) are written from the hub's
        loop with bytes shared by the view's connections at the same position, or nothing is written if
        the view has none of it and no position frame is due; the connection's task is not woken. The
        entries delivered, or None: the task sends it (update mode, a mode just learnt, another position)."""
        feed, run, views = self.feed, batch.run, self._views
        if (run is None or feed.view.removals or views.removals or not self.epoch or self.epoch != self.hub.epoch
                or run[0] != self.merger.delivered + 1 or run[0] != feed.seen + 1
                or self._acks_sent is not self.acks.policy):
            return None
        items = batch.view_items(feed.view, self._data_of, self._append_views)
        now_s = time.monotonic()
        now = int(now_s * 1000)  # monotonic_ms()'s, read once
        framed = feed.frame_due(items, now)
        if framed and not self.transport.write(
                batch.view_wire(feed.view, self.epoch, feed.sent, items, self.max_frame_bytes)):
            return None
        self.merger.take_run(*run)
        feed.passed(batch[-1].entry, now, framed=framed)
        if framed:
            self._last_frame_s = now_s
        was_due, timers = self.timers.position_due, self.timers
        timers.position_due = self._last_frame_s + self._interval_s if feed.seen > feed.sent else None
        if was_due is None and timers.position_due is not None:
            self.subscription.nudge()  # its task waits for a ping; the position frame is due sooner
        return len(items)  # counted by the hub, once per batch

    def _follow_mode(self) -> None:
        """The view as compiled for the stream's mode now: a connection opened before the mode was known
        (no descriptor yet) was compiled for an append stream; once the hub learns it is an update stream,
        its next batch is evaluated with removals (its feed remembers no key yet: a key that then leaves
        the view is removed, a no-op for a client that does not hold it)."""
        views = self.hub.views
        if views.removals is not None and views.removals != self.feed.view.removals:
            self.feed.view = views.compiled(self._view)

    async def _send_live(self, batch: LiveBatch) -> bool:
        self._follow_mode()
        feed, run = self.feed, batch.run
        if run is not None and not feed.view.removals and run[0] == self.merger.delivered + 1 == feed.seen + 1:
            # The usual case once caught up: the whole batch is due, and its items for this view were
            # evaluated once for every connection of the view (append mode: they depend on nothing else).
            self.merger.take_run(*run)
            items = batch.view_items(feed.view, self._data_of, self._append_views)
            encodings = {item.entry.seq: batch[item.entry.seq - run[0]].encoded for item in items}
            await self._send_view(feed.advance(items, batch[-1].entry, monotonic_ms()), encodings)
            return True
        sent, gap = self.merger.take([live.entry for live in batch])
        encodings = {live.entry.seq: live.encoded for live in batch}
        await self._send_view(self.feed.offer(sent, monotonic_ms()), encodings)
        if gap is not None:
            metrics.GAPS_DETECTED.labels(stream=self.hub.stream).inc()
            return False
        return True

    async def _send_replayed(self, entries: list[Entry], page: list[tuple[Entry, EncodedEntry]],
                             pending: list[LiveEntry]) -> None:
        self._follow_mode()
        await self._send_view(self.feed.offer(entries, monotonic_ms()), replay_encodings(page, pending))

    async def _on_time(self) -> None:
        await super()._on_time()
        if self.subscription.ended is None:
            await self._send_view(self.feed.due(monotonic_ms()), {})

    async def _send_view(self, frames: list[ViewFrame], encodings: dict[int, EncodedEntry]) -> None:
        def encoded(item: ViewItem) -> EncodedEntry:
            if item.removed:
                return encode_removal(item.entry)
            found = encodings.get(item.entry.seq)
            return encode_entry(item.entry) if found is None else found

        if frames:
            epoch = await self._frame_epoch()
            for text in self._ack_policy_frames():
                await self.socket.send_text(text)
            for frame in frames:
                for text in encode_view_frame(epoch, frame, encoded, self.max_frame_bytes):
                    await self.socket.send_text(text)
                self._delivered.inc(len(frame.items))
            self._last_frame_s = time.monotonic()
        feed = self.feed
        self.timers.position_due = self._last_frame_s + self._interval_s if feed.seen > feed.sent else None
