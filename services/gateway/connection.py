"""One WebSocket client: hello, resume or snapshot, history merged with live by seq, acks into its session.

The decisions are the pure functions of ``recovery.py``; this module only does the I/O around them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from sparkwire.gateway import metrics
from sparkwire.gateway.auth import AuthError, Grant, check_token
from sparkwire.gateway.hub import StreamHub
from sparkwire.gateway.recovery import ReplayMerger, decide_start, junction_step
from sparkwire.gateway.sessions import SessionPosition, SessionStore
from sparkwire.gateway.subscription import LiveBatch, LiveEntry, Subscription
from sparkwire.gateway.wire import Message, Transport
from sparkwire.protocol.client_frames import Ack, Hello, Ping, Pong, ProtocolError, encode_heartbeat, parse_client_frame
from sparkwire.protocol.close_codes import CloseCode, close_reason
from sparkwire.protocol.limits import DEFAULT_ACKS_PER_SECOND, MAX_ACK_INTERVAL_MS, PING_INTERVAL_S, PONG_TIMEOUT_S
from sparkwire.protocol.server_frames import (
    EncodedEntry,
    Welcome,
    encode_entry,
    encode_error,
    encode_snapshot,
    encode_welcome,
    pack_entries,
)
from sparkwire.replaylog.model import Entry
from sparkwire.replaylog.port import UNAVAILABLE

log = logging.getLogger(__name__)

# How long a close frame may wait behind data the client has not read yet (a slow consumer that wakes up
# reads its backlog, then the close code) before the connection is dropped without it.
CLOSE_TIMEOUT_S = 5.0
# How long the ``error`` frame before a close the client caused may wait; the close is sent either way.
ERROR_FRAME_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ConnectionSettings:
    ack_every: int
    ack_interval_ms: int
    hello_timeout_s: float
    max_client_frame_bytes: int
    max_server_frame_bytes: int
    page_size: int
    auth_secret: str
    ping_interval_s: float = PING_INTERVAL_S
    pong_timeout_s: float = PONG_TIMEOUT_S
    acks_per_second: int = DEFAULT_ACKS_PER_SECOND

    def ack_policy(self, connections: int) -> tuple[int, int]:
        """(ackEvery, ackIntervalMs) to ask of a client joining a pod that holds ``connections``: the
        configured ones, stretched so that all clients together ack about ``acks_per_second`` times a
        second. Acks only move the server-side bookmark (clients resume from their cursors), and parsing
        and storing them was the pod's largest cost after the sends at 5,000 clients."""
        stretch = max(1.0, connections / self.acks_per_second)
        interval_ms = min(int(self.ack_interval_ms * stretch), max(MAX_ACK_INTERVAL_MS, self.ack_interval_ms))
        return int(self.ack_every * interval_ms / self.ack_interval_ms), interval_ms


# How each ending of a subscription closes the connection ("receiver" re-raises what ended the receiver).
_ENDINGS: dict[str, tuple[CloseCode, str]] = {
    "slow_consumer": (CloseCode.SLOW_CONSUMER, "send queue overflowed"),
    "stream_reset": (CloseCode.STREAM_RESET, "stream epoch changed"),
    "draining": (CloseCode.GOING_AWAY, "pod draining"),
    "timeout": (CloseCode.TIMEOUT, "no frame from the client in time"),
    "token_expired": (CloseCode.TOKEN_EXPIRED, "token expired"),
}


@dataclass(slots=True)
class Timers:
    """When the sender must next wake without a batch: the next ping, or the token's expiry."""

    next_ping: float
    expires_at_monotonic: float | None
    pings: int = 0

    def seconds_to_next(self, now: float) -> float:
        due = self.next_ping if self.expires_at_monotonic is None else min(self.next_ping, self.expires_at_monotonic)
        return max(due - now, 0.0)


class Close(Exception):
    """End the connection with ``code``; a close the client caused gets an ``error`` frame first."""

    def __init__(self, code: CloseCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class Connection:
    # Slots: thousands of idle connections each kept a dict of these.
    __slots__ = (
        "_delivered", "_latency", "draining", "epoch", "grant", "hub", "last_ack", "last_heard",
        "max_frame_bytes", "merger", "receive_error", "reported", "session_id", "sessions", "settings",
        "stored", "stream", "timers", "ttl_refreshed", "websocket", "wire",
    )

    def __init__(self, websocket: WebSocket, wire: Transport, hub: StreamHub, sessions: SessionStore,
                 settings: ConnectionSettings, draining: asyncio.Event) -> None:
        self.websocket = websocket
        self.wire = wire
        self.hub = hub
        self.sessions = sessions
        self.settings = settings
        self.draining = draining
        self.stream = hub.stream
        self.session_id = ""
        self.stored: SessionPosition | None = None  # the adopted session's last ack
        self.grant: Grant | None = None
        self.epoch = ""
        self.merger = ReplayMerger(0)
        self.last_ack = 0
        self.reported = (0, 0)
        self.last_heard = time.monotonic()
        self.timers = Timers(next_ping=self.last_heard + settings.ping_interval_s, expires_at_monotonic=None)
        self.max_frame_bytes = settings.max_server_frame_bytes
        self.receive_error: BaseException | None = None  # what ended the client's side, re-raised by _run
        self.ttl_refreshed = 0.0  # when this connection last set its session's TTL
        # Labelled children looked up once: labels() per send is measurable at thousands of clients.
        self._delivered = metrics.ENTRIES_DELIVERED.labels(stream=self.stream)
        self._latency = metrics.DELIVERY_LATENCY

    async def serve(self) -> None:
        """Run until the client leaves or a ``Close`` is raised; never lets an error escape."""
        code: CloseCode | None = None
        try:
            await self._serve()
        except Close as close:
            code = close.code
            await self._close(close.code, close.reason)
        except ProtocolError as error:
            code = error.code
            await self._close(error.code, error.reason)
        except AuthError as error:
            code = error.code
            await self._close(error.code, error.reason)
        except (WebSocketDisconnect, ConnectionError):
            pass
        except UNAVAILABLE as error:
            metrics.REDIS_ERRORS.labels(operation="connection").inc()
            code = CloseCode.REDIS_UNAVAILABLE
            await self._close(CloseCode.REDIS_UNAVAILABLE, f"redis unavailable: {type(error).__name__}")
        except Exception:
            log.exception("connection failed")
            code = CloseCode.INTERNAL_ERROR
            await self._close(CloseCode.INTERNAL_ERROR, "internal error")
        if code is not None:
            metrics.CLOSES.labels(code=str(int(code))).inc()

    async def _serve(self) -> None:
        hello = await self._receive_hello()
        if self.settings.auth_secret:
            self.grant = check_token(hello.token, self.settings.auth_secret, self.stream)
            self.timers.expires_at_monotonic = time.monotonic() + self.grant.expires_at - time.time()
        await self._choose_session(hello.session)
        subscription = self.hub.subscribe()  # before any read, so nothing committed from now on is missed
        try:
            await self._start(hello)
            await self._run(subscription)
        finally:
            self.hub.unsubscribe(subscription)
            # The client may reconnect to another pod at once: its last ack must be there first.
            with contextlib.suppress(*UNAVAILABLE):
                await self.sessions.flush(only=(self.session_id, self.stream))

    async def _receive_hello(self) -> Hello:
        try:
            async with asyncio.timeout(self.settings.hello_timeout_s):
                message = await self.websocket.receive()
        except TimeoutError:
            raise Close(CloseCode.TIMEOUT, "no hello in time") from None
        frame = parse_client_frame(self._payload(message), self.settings.max_client_frame_bytes)
        if not isinstance(frame, Hello):
            raise ProtocolError(CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")
        return frame

    async def _choose_session(self, requested: str | None) -> None:
        """Keep the hello's session id only if a pod issued it for this stream to the same subject; any
        other id gets a fresh one, so a client cannot take over a session by naming it."""
        subject = self.grant.subject if self.grant else ""
        if requested is not None:
            owner, self.stored = await self.sessions.lookup(requested, self.stream)
            if owner == subject:
                self.session_id = requested
                return
        self.session_id, self.stored = uuid.uuid4().hex, None

    def _payload(self, message: Mapping[str, Any]) -> str | bytes:
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(int(str(message.get("code", 1000))))
        text, data = message.get("text"), message.get("bytes")
        if isinstance(text, str):
            return text
        return data if isinstance(data, bytes) else b""

    async def _start(self, hello: Hello) -> None:
        meta = await self.hub.meta()
        # Used even with a cursor: its counts are the baseline of the cumulative ones the acks carry.
        stored = self.stored
        plan = decide_start(hello.cursor, stored.seq if stored else None, meta,
                            session_epoch=stored.epoch if stored else None)
        if stored is not None:
            self.reported = (stored.duplicates, stored.gaps)
        await self.sessions.connected(self.session_id, self.stream, self.grant.subject if self.grant else "")
        self.ttl_refreshed = time.monotonic()
        self.epoch = meta.epoch
        ack_every, ack_interval_ms = self.settings.ack_policy(len(self.hub.subscriptions))
        await self.websocket.send_text(encode_welcome(Welcome(
            session=self.session_id, epoch=meta.epoch, head_seq=meta.last_seq, recovered=plan.recovered,
            reset=None if plan.reset == "none" else plan.reset, ack_every=ack_every, ack_interval_ms=ack_interval_ms,
        )))
        if plan.after_seq is not None:
            after = plan.after_seq
        else:
            metrics.RESETS.labels(stream=self.stream, reason=plan.reset).inc()
            snapshot = await self.hub.log.snapshot()
            self.epoch, after = snapshot.epoch, snapshot.seq
            for frame in encode_snapshot(snapshot, self.settings.max_server_frame_bytes):
                await self.websocket.send_text(frame)
        self.merger = ReplayMerger(after)
        self.last_ack = after

    async def _run(self, subscription: Subscription) -> None:
        """Send until the subscription ends. This task is the only one of the connection: the client's
        frames are handled as they arrive (``_on_message``), and the hub writes live batches through while
        this task waits for them (``_write_through``)."""
        if self.draining.is_set():  # drained between the accept and the subscribe
            subscription.end("draining")
        subscription.write_through = self._write_through
        self.wire.listen(lambda message: self._on_message(message, subscription))
        try:
            await self._send_loop(subscription)
        finally:
            self.wire.listen(None)
            subscription.write_through = None
        reason = subscription.ended
        if reason == "receiver" and self.receive_error is not None:
            raise self.receive_error  # a bad frame, the client leaving
        if reason == "slow_consumer":
            metrics.SLOW_CONSUMER_CLOSES.labels(stream=self.stream).inc()
        code, text = _ENDINGS.get(reason or "", (CloseCode.INTERNAL_ERROR, "connection ended"))
        raise Close(code, text)

    async def _send_loop(self, subscription: Subscription) -> None:
        """History, then live batches, until the subscription ends."""
        pending: list[LiveEntry] = []
        while subscription.ended is None:
            await self._catch_up(subscription, pending)
            pending = await self._live(subscription)

    async def _live(self, subscription: Subscription) -> list[LiveEntry]:
        """Send live batches as they come; when the live feed skipped a seq, return what is left of it for
        a catch-up from history (nothing, once the subscription ended)."""
        while (batches := await self._next_batches(subscription)) is not None:
            for index, batch in enumerate(batches):
                if not await self._send_live(batch):
                    return [live for later in batches[index:] for live in later
                            if live.entry.seq > self.merger.delivered]
        return []

    async def _next_batches(self, subscription: Subscription) -> list[LiveBatch] | None:
        """The batches waiting (after waiting for some, pinging on time meanwhile); None once it ended."""
        while subscription.ended is None:
            batches = subscription.take()
            if batches:
                return batches
            await subscription.wait(self.timers.seconds_to_next(time.monotonic()))
            await self._on_time(subscription)
        return None

    async def _send_live(self, batch: LiveBatch) -> bool:
        """Send what of ``batch`` is due; False if it skipped a seq (the rest must come from history)."""
        sent, gap = self.merger.take([live.entry for live in batch])
        if len(sent) == len(batch):  # all of it, in order: the batch's shared frames
            await self._send_frames(batch.frames(await self._frame_epoch(), self.max_frame_bytes), len(sent))
        else:
            overlap = sum(1 for live in batch if live.entry.seq <= self.merger.delivered) - len(sent)
            if overlap > 0:
                metrics.GATEWAY_DUPLICATES.labels(stream=self.stream).inc(overlap)
            sent_seqs = {entry.seq for entry in sent}
            await self._send([live.encoded for live in batch if live.entry.seq in sent_seqs])
        if sent:  # one observation per frame sent: commit of its oldest entry -> send
            self._latency.observe(max(now_ms() - sent[0].commit_ms, 0) / 1000)
        if gap is not None:
            metrics.GAPS_DETECTED.labels(stream=self.stream).inc()
            return False
        return True

    def _write_through(self, batch: LiveBatch) -> bool:
        """Called by the hub while this connection waits for its next batch: write ``batch`` straight to
        the socket if it is exactly the run due next (``wire.py``); False leaves it to ``_live``."""
        run = batch.run
        if run is None or not self.epoch or self.epoch != self.hub.epoch or run[0] != self.merger.delivered + 1:
            return False
        if not self.wire.write(batch.wire(self.epoch, self.max_frame_bytes)):
            return False
        self.merger.take_run(*run)  # counted and timed by the hub, once per batch
        return True

    async def _catch_up(self, subscription: Subscription, pending: list[LiveEntry]) -> None:
        """Send history after ``merger.delivered`` until it joins the live entries buffered meanwhile."""
        while subscription.ended is None:
            pending.extend(live for batch in subscription.take() for live in batch)
            page, source = await self._history_page()
            encodings = {live.entry.seq: live.encoded for live in pending}
            encodings.update({entry.seq: encoded for entry, encoded in page})
            step = junction_step(self.merger, [entry for entry, _ in page], [live.entry for live in pending],
                                 self.settings.page_size)
            metrics.ENTRIES_REPLAYED.labels(stream=self.stream, source=source).inc(len(step.entries))
            await self._send([encodings[entry.seq] for entry in step.entries])
            if step.next == "live":
                return
            if step.next == "gap":
                metrics.GAPS_DETECTED.labels(stream=self.stream).inc()
                # trimmed under us or a new epoch: the client resumes and gets a snapshot
                raise Close(CloseCode.STREAM_RESET, f"seq {self.merger.delivered + 1} is no longer in the log")
            await self._on_time(subscription)  # a long replay still pings and still ends a stale token

    async def _on_time(self, subscription: Subscription) -> None:
        """Application pings, the pong timeout and the token's expiry, all checked by the sender: browsers
        cannot send or observe WebSocket-level pings, and a proxy may keep a dead client's TCP connection
        open for a long time; a token is checked at the hello only, so without the expiry a revoked reader
        would read for as long as its connection lasts. Any frame from the client counts as an answer."""
        now = time.monotonic()
        if self.grant is not None and time.time() >= self.grant.expires_at:
            subscription.end("token_expired")
        elif now >= self.timers.next_ping:
            if now - self.last_heard > self.settings.pong_timeout_s:
                subscription.end("timeout")
                return
            self.timers.pings += 1
            self.timers.next_ping = now + self.settings.ping_interval_s
            await self.websocket.send_text(encode_heartbeat(Ping(self.timers.pings)))

    async def _history_page(self) -> tuple[list[tuple[Entry, EncodedEntry]], str]:
        """The next page after what was delivered: from the pod's ring when it has it, else Redis."""
        ring = self.hub.ring_after(self.merger.delivered, self.settings.page_size)
        if ring is not None and self.hub.epoch == self.epoch:
            return [(live.entry, live.encoded) for live in ring], "ring"
        entries = await self.hub.log.read_after(self.merger.delivered, self.settings.page_size)
        return [(entry, encode_entry(entry)) for entry in entries], "redis"

    async def _frame_epoch(self) -> str:
        if not self.epoch:  # connected to an empty stream: its epoch was created by a commit since
            self.epoch = self.hub.epoch or (await self.hub.meta()).epoch
        return self.epoch

    async def _send(self, entries: list[EncodedEntry]) -> None:
        if entries:
            await self._send_frames(pack_entries(await self._frame_epoch(), entries, self.max_frame_bytes),
                                    len(entries))

    async def _send_frames(self, frames: list[str], entries: int) -> None:
        for frame in frames:
            await self.websocket.send_text(frame)
        self._delivered.inc(entries)

    def _on_message(self, message: Message, subscription: Subscription) -> None:
        """One message from the client, handled in the protocol's callback as it is parsed: no task, no
        queue. Whatever ends the client's side is kept for ``_run`` and ends the subscription."""
        if subscription.ended is not None:
            return
        try:
            self.last_heard = time.monotonic()
            frame = parse_client_frame(self._payload(message), self.settings.max_client_frame_bytes)
            if isinstance(frame, Ack):
                self._on_ack(frame)
            elif isinstance(frame, Ping):
                if not self.wire.reply(encode_heartbeat(Pong(frame.t))):  # closing, or pinging without reading
                    subscription.end("slow_consumer")
            elif not isinstance(frame, Pong):
                raise ProtocolError(CloseCode.PROTOCOL_VIOLATION, "a second hello on one connection")
        except Exception as error:
            self.receive_error = error
            subscription.end("receiver")

    def _on_ack(self, ack: Ack) -> None:
        if ack.seq > self.merger.delivered or ack.seq < self.last_ack:
            raise ProtocolError(CloseCode.PROTOCOL_VIOLATION,
                                f"ack of seq {ack.seq} outside {self.last_ack}..{self.merger.delivered}")
        duplicates, gaps = self.reported
        if ack.duplicates > duplicates:
            metrics.CLIENT_DUPLICATES.labels(stream=self.stream).inc(ack.duplicates - duplicates)
        if ack.gaps > gaps:
            metrics.CLIENT_GAPS.labels(stream=self.stream).inc(ack.gaps - gaps)
        self.reported = (max(duplicates, ack.duplicates), max(gaps, ack.gaps))
        self.last_ack = ack.seq
        refresh_ttl = self.sessions.ttl_refresh_due(self.ttl_refreshed)
        if refresh_ttl:
            self.ttl_refreshed = time.monotonic()
        self.sessions.acked(self.session_id, self.stream, SessionPosition(self.epoch, ack.seq, *self.reported),
                            self.grant.subject if self.grant else "", refresh_ttl=refresh_ttl)

    async def _close(self, code: CloseCode, reason: str) -> None:
        if code.error_frame_first:  # behind unread data (a slow or silent client) it may not go out in time
            with contextlib.suppress(Exception):
                async with asyncio.timeout(ERROR_FRAME_TIMEOUT_S):
                    await self.websocket.send_text(encode_error(code, reason))
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self.websocket.close(code=int(code), reason=close_reason(reason))


def now_ms() -> int:
    return int(time.time() * 1000)
