"""A connection's sending side, its only task: history merged with live by seq, then live batches as they
come, with application pings and the token's expiry on time.

The decisions (what of a batch is due, where history joins live) are the pure functions of ``recovery``;
this module does the I/O around them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sparkwire.gateway import metrics
from sparkwire.gateway.auth.tokens import Grant
from sparkwire.gateway.connection.ack_budget import AckBudget
from sparkwire.gateway.connection.ending import Close
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.fanout.subscription import LiveBatch, LiveEntry, Subscription
from sparkwire.gateway.recovery.junction import ReplayMerger, junction_step
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.transport.contract import FrameSocket, Transport, serialize_text_frames
from sparkwire.protocol.client_frames import Ping, encode_heartbeat
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.server_frames import AckPolicy, EncodedEntry, encode_entry, pack_entries
from sparkwire.replaylog.model import Entry


@dataclass(slots=True)
class Timers:
    """When the sender must next wake without a batch (the next ping, the token's expiry, or a filtered
    subscription's position frame), and when the client was last heard from (the receiver notes it; any frame
    counts as an answer to a ping)."""

    next_ping: float
    expires_at_monotonic: float | None
    last_heard: float
    pings: int = 0
    position_due: float | None = None  # a filtered subscription's next position frame (``view_sender``)

    def seconds_to_next(self, now: float) -> float:
        due = self.next_ping if self.expires_at_monotonic is None else min(self.next_ping, self.expires_at_monotonic)
        if self.position_due is not None:
            due = min(due, self.position_due)
        return max(due - now, 0.0)


class Sender:
    # Slots: thousands of idle connections each kept a dict of these.
    __slots__ = ("_acks_sent", "_delivered", "_lane", "_latency", "acks", "epoch", "grant", "hub", "max_frame_bytes",
                 "merger", "settings", "socket", "subscription", "timers", "transport")

    def __init__(self, socket: FrameSocket, transport: Transport, hub: StreamHub, subscription: Subscription,
                 settings: ConnectionSettings, timers: Timers, grant: Grant | None, epoch: str, after: int, *,
                 acks: AckBudget, acks_sent: AckPolicy | None = None) -> None:
        """``acks``: the stream's ack budget on this pod; ``acks_sent``: the policy the client's welcome asked
        for (by default the budget's current one)."""
        self.acks = acks
        self._acks_sent = self.acks.policy if acks_sent is None else acks_sent
        self.socket = socket
        self.transport = transport
        self._lane = transport.lane()  # its direct path for the hub's fan-out, armed by ``write_through``
        self.hub = hub
        self.subscription = subscription
        self.settings = settings
        self.timers = timers
        self.grant = grant
        self.epoch = epoch  # the epoch frames carry; empty until a stream connected to while empty is written
        self.merger = ReplayMerger(after)
        self.max_frame_bytes = settings.max_server_frame_bytes
        # Labelled children looked up once: labels() per send is measurable at thousands of clients.
        self._delivered = metrics.child(metrics.ENTRIES_DELIVERED, hub.stream)
        self._latency = metrics.DELIVERY_LATENCY

    @property
    def delivered(self) -> int:
        """The last seq sent to the client."""
        return self.merger.delivered

    async def run(self) -> None:
        """History, then live batches, until the subscription ends."""
        pending: list[LiveEntry] = []
        while self.subscription.ended is None:
            await self._catch_up(pending)
            pending = await self._live()

    def write_through(self, batch: LiveBatch) -> int | None:
        """Called by the hub while this connection waits for its next batch: write ``batch`` straight to
        the socket if it is exactly the run due next (``transport.wire``): the entries written;
        None leaves it to ``_live``."""
        run = batch.run
        if (run is None or run[0] != self.merger.delivered + 1 or not self.epoch or self.epoch != self.hub.epoch
                or self._acks_sent is not self.acks.policy):  # a new ack policy goes first: the task sends both
            return None
        if not self.transport.write(batch.wire(self.epoch, self.max_frame_bytes)):
            return None
        self.merger.take_run(*run)  # counted and timed by the hub, once per batch
        lane = self._lane
        if lane is not None:  # the next batches, while nothing of the above changes, take the hub's lane
            self.subscription.arm_lane(lane, self.merger, self.epoch, self.acks, self._acks_sent,
                                       self.max_frame_bytes)
        return len(batch)

    async def _live(self) -> list[LiveEntry]:
        """Send live batches as they come; when the live feed skipped a seq, return what is left of it for
        a catch-up from history (nothing, once the subscription ended)."""
        # The waiting is here, not in a helper: an idle connection keeps every coroutine frame it waits in.
        subscription = self.subscription
        while subscription.ended is None:
            batches = subscription.take()
            if not batches:  # wait for some, pinging on time meanwhile
                await subscription.wait(self.timers.seconds_to_next(time.monotonic()))
                await self._on_time()
                continue
            for index, batch in enumerate(batches):
                if not await self._send_live(batch):
                    return [live for later in batches[index:] for live in later
                            if live.entry.seq > self.merger.delivered]
        return []

    async def _send_live(self, batch: LiveBatch) -> bool:
        """Send what of ``batch`` is due; False if it skipped a seq (the rest must come from history)."""
        sent, gap = self.merger.take([live.entry for live in batch])
        if len(sent) == len(batch):  # all of it, in order: the batch's shared frames, and their bytes
            epoch = await self._frame_epoch()
            await self._send_frames(batch.frames(epoch, self.max_frame_bytes), len(sent),
                                    batch.wire(epoch, self.max_frame_bytes))
        else:
            overlap = sum(1 for live in batch if live.entry.seq <= self.merger.delivered) - len(sent)
            if overlap > 0:
                metrics.GATEWAY_DUPLICATES.labels(stream=self.hub.stream).inc(overlap)
            sent_seqs = {entry.seq for entry in sent}
            await self._send([live.encoded for live in batch if live.entry.seq in sent_seqs])
        if sent:  # one observation per frame sent: commit of its oldest entry -> send
            self._latency.observe(max(now_ms() - sent[0].commit_ms, 0) / 1000)
        if gap is not None:
            metrics.GAPS_DETECTED.labels(stream=self.hub.stream).inc()
            return False
        return True

    async def _catch_up(self, pending: list[LiveEntry]) -> None:
        """Send history after ``merger.delivered`` until it joins the live entries buffered meanwhile."""
        subscription = self.subscription
        while subscription.ended is None:
            pending.extend(live for batch in subscription.take() for live in batch)
            page, source = await self._history_page()
            step = junction_step(self.merger, [entry for entry, _ in page], [live.entry for live in pending],
                                 self.settings.page_size)
            metrics.child(metrics.ENTRIES_REPLAYED, self.hub.stream, source).inc(len(step.entries))
            await self._send_replayed(step.entries, page, pending)
            if step.next == "live":
                return
            if step.next == "gap":
                metrics.GAPS_DETECTED.labels(stream=self.hub.stream).inc()
                # trimmed under us or a new epoch: the client resumes and gets a snapshot
                raise Close(CloseCode.STREAM_RESET, f"seq {self.merger.delivered + 1} is no longer in the log")
            await self._on_time()  # a long replay still pings and still ends a stale token

    async def _send_replayed(self, entries: list[Entry], page: list[tuple[Entry, EncodedEntry]],
                             pending: list[LiveEntry]) -> None:
        """Send a run of replayed entries, each encoded once per pod (in ``page`` or ``pending``); a run of
        consecutive seqs in the hub's epoch is packed once per pod too (``StreamHub.replay_frames``)."""
        def encoded() -> list[EncodedEntry]:
            encodings = replay_encodings(page, pending)
            return [encodings[entry.seq] for entry in entries]

        if not entries:
            return
        epoch = await self._frame_epoch()
        first, last = entries[0].seq, entries[-1].seq
        if epoch and epoch == self.hub.epoch and last - first + 1 == len(entries):
            frames, wire = self.hub.replay_frames(epoch, first, last, self.max_frame_bytes, encoded)
            await self._send_frames(frames, len(entries), wire)
            return
        await self._send(encoded())

    async def _on_time(self) -> None:
        """Application pings, the pong timeout and the token's expiry, all checked by the sender: browsers
        cannot send or observe WebSocket-level pings, and a proxy may keep a dead client's TCP connection
        open for a long time; a token is checked at the hello only, so without the expiry a revoked reader
        would read for as long as its connection lasts. Any frame from the client counts as an answer."""
        now = time.monotonic()
        timers = self.timers
        if self.grant is not None and time.time() >= self.grant.expires_at:
            self.subscription.end("token_expired")
        elif now >= timers.next_ping:
            if now - timers.last_heard > self.settings.pong_timeout_s:
                self.subscription.end("timeout")
                return
            timers.pings += 1
            timers.next_ping = now + self.settings.ping_interval_s
            await self.socket.send_text(encode_heartbeat(Ping(timers.pings)))

    async def _history_page(self) -> tuple[list[tuple[Entry, EncodedEntry]], str]:
        """The next page after what was delivered: from the pod's ring when it has it, else the log."""
        ring = self.hub.ring_after(self.merger.delivered, self.settings.page_size)
        if ring is not None and self.hub.epoch == self.epoch:
            return [(live.entry, live.encoded) for live in ring], "ring"
        entries = await self.hub.log.read_after(self.merger.delivered, self.settings.page_size)
        return [(entry, encode_entry(entry)) for entry in entries], "redis"

    def _ack_policy_frames(self) -> list[str]:
        """[the ``acks`` frame] when the budget's policy moved since the client's last one (counted as sent
        from now), else []."""
        policy = self.acks.policy
        if policy is self._acks_sent:
            return []
        self._acks_sent = policy
        return [self.acks.frame]

    async def _frame_epoch(self) -> str:
        if not self.epoch:  # connected to an empty stream: its epoch was created by a commit since
            self.epoch = self.hub.epoch or (await self.hub.meta()).epoch
        return self.epoch

    async def _send(self, entries: list[EncodedEntry]) -> None:
        if entries:
            await self._send_frames(pack_entries(await self._frame_epoch(), entries, self.max_frame_bytes),
                                    len(entries))

    async def _send_frames(self, frames: list[str], entries: int, wire: bytes | None = None) -> None:
        """``frames`` in one direct write when the transport takes it (``wire``: their bytes, when shared by
        every connection), else one by one through the socket. A client catching up, or behind the live
        feed, got every frame through the ASGI send and websockets' framing in Python: several percent of
        the pod's CPU in a profile of the resume storm after a pod was lost. A new ack policy
        (``ack_budget``) goes before them."""
        update = self._ack_policy_frames()
        if update:
            frames, wire = [*update, *frames], None
        if self.transport.write(serialize_text_frames(frames) if wire is None else wire):
            self._delivered.inc(entries)
            return
        for frame in frames:
            await self.socket.send_text(frame)
        self._delivered.inc(entries)


def replay_encodings(page: list[tuple[Entry, EncodedEntry]], pending: list[LiveEntry]) -> dict[int, EncodedEntry]:
    """Each seq's encoding, of a history page and the live entries buffered meanwhile (both encoded once per pod)."""
    encodings = {live.entry.seq: live.encoded for live in pending}
    encodings.update({entry.seq: encoding for entry, encoding in page})
    return encodings


def now_ms() -> int:
    return int(time.time() * 1000)
