"""The asyncio loop of the client: connect, hello, feed frames to the ``ClientSession``, send what it
says, ack on time, and reconnect with backoff until stopped or closed for good; and ``async for entry in
client``, the applied entries through a bounded queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
from collections import Counter, deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.typing import Origin

from sparkwire.client.reconnect import (
    ABNORMAL_CLOSURE,
    CLIENT_GAP_CLOSE,
    CLIENT_PROTOCOL_ERROR_CLOSE,
    ReconnectPolicy,
    TerminalClose,
    next_step,
)
from sparkwire.client.session import ClientSession
from sparkwire.protocol.close_codes import CloseCode, close_reason
from sparkwire.protocol.items import StateItem
from sparkwire.protocol.positions import Cursor
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire.protocol.view_frames import Removal

# Each connection's end and the delay before the next one, at INFO: why a client was away, and for how long.
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientStats:
    connects: int
    """Connections that got a ``welcome``."""
    reconnects: int
    """Connections opened after the first one (successful TCP + upgrade)."""
    connection_failures: int
    """Attempts that did not get as far as an open WebSocket (refused, timed out, bad upgrade)."""
    duplicates: int
    gaps: int
    resets: dict[str, int]
    """Snapshot starts by the ``reset`` reason of their welcome."""
    frames_received: int
    acks_sent: int
    closes: dict[int, int]
    """How the connections ended, by close code (1006: dropped without a close frame)."""
    terminal: TerminalClose | None


@dataclass(frozen=True)
class _Ended:
    code: int
    reason: str
    welcomed: bool
    client_gap: bool = False
    client_refused_frame: bool = False
    stopped: bool = False


TOKEN_EXPIRED = int(CloseCode.TOKEN_EXPIRED)
DEFAULT_MAX_QUEUED = 1_000


class _EntryQueue:
    """The entries applied while ``async for`` runs and not yet taken by it, and the removals among them in
    seq order. The connection loop reads no further frame while it holds ``max_queued`` or more (it holds at
    most that plus one frame's items)."""

    def __init__(self, max_queued: int) -> None:
        if max_queued < 1:
            raise ValueError(f"max_queued must be at least 1, got {max_queued}")
        self.max_queued = max_queued
        self.entries: deque[ReceivedEntry | Removal] = deque()
        self.readable = asyncio.Event()  # an entry was put, or the client ended: the iterator looks again
        self.room = asyncio.Event()  # an entry was taken, or the iterator or client ended: the loop looks again
        self.detached = False

    @property
    def full(self) -> bool:
        return not self.detached and len(self.entries) >= self.max_queued

    def put(self, entries: Sequence[ReceivedEntry | Removal]) -> None:
        self.entries.extend(entries)
        self.readable.set()

    def take(self) -> ReceivedEntry | Removal:
        entry = self.entries.popleft()
        if len(self.entries) < self.max_queued:
            self.room.set()
        return entry

    def wake(self) -> None:
        self.readable.set()
        self.room.set()


class StreamClient:
    """One stream, read exactly once over WebSockets: ``await run()`` until ``await stop()``.

    ``url`` is the gateway's, e.g. ``ws://127.0.0.1:8080/ws?stream=metrics``. ``run()`` raises
    ``TerminalClose`` when the server ends the session with a code that must not be retried (also kept
    in ``stats().terminal``); every other ending reconnects with backoff and resumes from ``cursor``.
    ``refresh_token`` is awaited for a fresh token when the server closes with 4419 (token expired) and
    the client resumes at once; without it, 4419 is terminal.

    ``filter`` (docs/protocol.md, "The filter form": field -> condition, ``"$key"`` for the key) asks for
    the entries that match it only; it is checked here, so a bad one raises ``FilterError`` (a
    ``ValueError`` naming the part) before any connection. ``on_removal`` gets the ``Removal`` of each key
    that stopped matching (update mode), once, as it leaves ``state`` — or, while ``async for`` runs, from
    the iteration in its place among the entries (after the entries before it are taken, before the next
    one is yielded), so a loop that renders what it takes never shows a key after its removal. A server
    that refuses the filter closes with 4422 (invalid) or 4423 (outside the token's scope): ``TerminalClose``.

    ``async for entry in client`` (or ``client.entries(max_queued)``) yields the entries applied from then
    on, each once, in seq order; it runs the client unless ``run()`` already runs, and ends when the client
    stops (raising the ``TerminalClose`` that ended it, if one did). Memory does not grow with the stream:
    see ``ClientSession`` for what is kept (``keep_applied=True`` keeps every applied entry, for tests).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        refresh_token: Callable[[], Awaitable[str]] | None = None,
        origin: str | None = None,
        on_entry: Callable[[ReceivedEntry], None] | None = None,
        dedup_capacity: int = 100_000,
        recent_capacity: int = 1_000,
        keep_applied: bool = False,
        reconnect: ReconnectPolicy | None = None,
        open_timeout_s: float = 5.0,
        silence_timeout_s: float = 30.0,
        open_socket: Callable[[], socket.socket] | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        filter: Mapping[str, object] | None = None,
        on_removal: Callable[[Removal], None] | None = None,
    ) -> None:
        self.url = url
        self.origin = origin
        self.refresh_token = refresh_token
        self.session = ClientSession(token=token, on_entry=on_entry, dedup_capacity=dedup_capacity,
                                     recent_capacity=recent_capacity, keep_applied=keep_applied, clock=clock,
                                     filter=filter, on_removal=on_removal and self._removed)
        self._on_removal = on_removal
        self._removals: list[Removal] = []  # taken out of the state by the frame being handled, while async for runs
        self.reconnect = reconnect if reconnect is not None else ReconnectPolicy()
        self.open_timeout_s = open_timeout_s
        # No frame at all for this long (the server pings every 20 s) means a dead or paused server, whose
        # TCP connection may stay open for minutes: drop it and resume, like after a 1006.
        self.silence_timeout_s = silence_timeout_s
        # A connected socket per attempt instead of websockets' own: to set socket options (tests use a
        # small receive buffer to stand in for a slow network) or to go through an already open tunnel.
        self.open_socket = open_socket
        self._rng = rng if rng is not None else random.Random()
        self._stop = asyncio.Event()
        self._progress = asyncio.Event()  # set after every frame: wakes ``wait_until``
        self._running = False
        self._finished = asyncio.Event()
        self._opened = 0
        self._connection_failures = 0
        self._closes: Counter[int] = Counter()
        self._terminal: TerminalClose | None = None
        self._queue: _EntryQueue | None = None  # while ``async for`` runs

    # -- what callers read ---------------------------------------------------------------------------

    @property
    def state(self) -> dict[str, StateItem]:
        return self.session.state

    @property
    def applied(self) -> list[tuple[int, str]]:
        """Every applied (seq, processingId): only with ``keep_applied=True`` (``RuntimeError`` otherwise)."""
        return self.session.applied

    @property
    def recent(self) -> deque[tuple[int, str]]:
        """The (seq, processingId) of the last ``recent_capacity`` entries applied, oldest first."""
        return self.session.recent

    @property
    def applied_count(self) -> int:
        return self.session.applied_count

    @property
    def cursor(self) -> Cursor | None:
        return self.session.cursor

    def stats(self) -> ClientStats:
        session = self.session
        return ClientStats(
            connects=session.welcomes,
            reconnects=max(0, self._opened - 1),
            connection_failures=self._connection_failures,
            duplicates=session.duplicates,
            gaps=session.gaps,
            resets=dict(session.resets),
            frames_received=session.frames_received,
            acks_sent=session.acks_sent,
            closes=dict(self._closes),
            terminal=self._terminal,
        )

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Wait until ``predicate()`` holds (checked after every frame); ``TimeoutError`` otherwise, or
        the ``TerminalClose`` that ended the client."""
        async with asyncio.timeout(timeout):
            while not predicate():
                if self._terminal is not None:
                    raise self._terminal
                if self._finished.is_set():
                    raise RuntimeError("the client stopped before the condition held")
                self._progress.clear()
                await self._progress.wait()

    # -- async for entry in client ---------------------------------------------------------------------

    def _call_on_removal(self, removal: Removal) -> None:
        if self._on_removal is not None:
            self._on_removal(removal)

    def _removed(self, removal: Removal) -> None:
        if self._queue is None:
            self._call_on_removal(removal)
        else:
            self._removals.append(removal)  # queued with the frame's entries, in seq order

    def _queue_applied(self, applied: tuple[ReceivedEntry, ...]) -> None:
        """The entries (and removals) one frame applied, for ``async for``, in seq order."""
        if self._queue is not None and (applied or self._removals):
            items: list[ReceivedEntry | Removal] = [*applied, *self._removals]
            self._queue.put(sorted(items, key=lambda item: item.seq) if self._removals else items)
        self._removals.clear()

    def __aiter__(self) -> AsyncIterator[ReceivedEntry]:
        return self.entries()

    async def entries(self, max_queued: int = DEFAULT_MAX_QUEUED) -> AsyncGenerator[ReceivedEntry, None]:
        """The entries applied from the first step on, each once, in seq order (as ``on_entry`` gets them,
        which still gets them too). One iteration at a time.

        Runs the client (``run()`` in a task) unless it already runs, and stops it when the iteration ends
        early (``break``: the generator's ``aclose()``, which ``contextlib.aclosing`` makes immediate).
        Ends after the last entry when the client stops (``await client.stop()``), or raises the
        ``TerminalClose`` that ended it. Backpressure: while ``max_queued`` entries wait to be taken, the
        client reads no further frame (it holds at most ``max_queued`` plus one frame's entries); the
        server sees a slow consumer, and a connection it drops is resumed from the cursor, so nothing is
        lost or repeated; entries keep being acknowledged when applied, not when taken.
        """
        if self._queue is not None:
            raise RuntimeError("the client's entries are already being iterated")
        queue = self._queue = _EntryQueue(max_queued)
        runner: asyncio.Task[None] | None = None
        try:
            await asyncio.sleep(0)  # lets a run() task created just before start: then it is not started twice
            if not self._running:
                self._finished.clear()
                runner = asyncio.create_task(self.run())
            while True:
                if queue.entries:
                    item = queue.take()
                    if isinstance(item, Removal):
                        self._call_on_removal(item)
                        continue
                    yield item
                elif self._finished.is_set():
                    break
                else:
                    queue.readable.clear()
                    await queue.readable.wait()
            if runner is not None:
                await runner  # raises the TerminalClose that ended it
            elif self._terminal is not None:
                raise self._terminal
        finally:
            queue.detached = True
            for item in queue.entries:  # not taken: every removal is still told, once
                if isinstance(item, Removal):
                    self._call_on_removal(item)
            queue.entries.clear()
            queue.wake()  # a loop waiting for room goes on
            if self._queue is queue:
                self._queue = None
            if runner is not None and not runner.done():
                await self.stop()
            if runner is not None and runner.done() and not runner.cancelled():
                runner.exception()  # retrieved: an ending the iteration did not reach (a break) is not reported

    async def _wait_for_room(self) -> bool:
        """Wait while ``async for`` has ``max_queued`` entries to take (or until stopped); True if it waited."""
        waited = False
        while (queue := self._queue) is not None and queue.full and not self._stop.is_set():
            waited = True
            queue.room.clear()
            await queue.room.wait()
        return waited

    # -- lifecycle -----------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Close the connection normally (after a last ack) and wait for ``run()`` to return."""
        self._stop.set()
        if self._queue is not None:
            self._queue.room.set()  # a loop held by a full queue goes on to close
        if self._running:
            await self._finished.wait()

    async def run(self) -> None:
        if self._running:
            raise RuntimeError("run() is already running")
        self._running = True
        self._finished.clear()
        try:
            await self._run()
        finally:
            self._running = False
            self._finished.set()
            self._progress.set()
            if self._queue is not None:
                self._queue.wake()

    async def _run(self) -> None:
        attempt, delay = 0, 0.0
        while not self._stop.is_set():
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):  # not wait_for: on 3.11 it can lose a cancel
                        await self._stop.wait()
                if self._stop.is_set():
                    return
            try:
                sock = await asyncio.to_thread(self.open_socket) if self.open_socket is not None else None
                async with connect(
                    self.url, open_timeout=self.open_timeout_s, max_size=None,
                    origin=Origin(self.origin) if self.origin is not None else None, sock=sock,
                ) as ws:
                    self._opened += 1
                    ended = await self._serve(ws)
            except (OSError, TimeoutError, InvalidHandshake) as error:
                # Refused, unreachable or a proxy's 502 while no backend is up: as resumable as a drop.
                self._connection_failures += 1
                ended = _Ended(ABNORMAL_CLOSURE, f"connect failed: {error!r}", welcomed=False)
            if ended.stopped:
                return
            self._closes[ended.code] += 1
            step = next_step(
                ended.code, attempt=attempt, welcomed=ended.welcomed, policy=self.reconnect, rng=self._rng,
                client_gap=ended.client_gap, can_refresh_token=self.refresh_token is not None,
            )
            # A frame this client cannot read would come again after a reconnect: a server or version bug.
            if not step.reconnect or ended.client_refused_frame:
                # The error frame sent before the close holds the reason the close frame may truncate.
                error_frame = self.session.last_error
                full = error_frame is not None and error_frame.code == ended.code
                self._terminal = TerminalClose(ended.code, error_frame.reason if error_frame and full else ended.reason)
                logger.warning("connection ended for good: %s", self._terminal)
                raise self._terminal
            attempt, delay = step.attempt, step.delay_s
            logger.info("connection ended: %s %s (welcomed: %s); reconnecting in %.2f s, attempt %d",
                        ended.code, ended.reason, ended.welcomed, delay, attempt)
            if ended.code == TOKEN_EXPIRED and self.refresh_token is not None:
                self.session.token = await self.refresh_token()

    async def _serve(self, ws: ClientConnection) -> _Ended:
        session = self.session
        closer = asyncio.create_task(self._close_when_stopped(ws))
        try:
            await ws.send(session.begin_connection())
            last_heard = time.monotonic()
            while True:
                silent_for = time.monotonic() - last_heard
                if silent_for >= self.silence_timeout_s:
                    ws.transport.abort()  # a close handshake would wait for the silent server too
                    reason = f"no frame from the server for {silent_for:.1f} s"
                    return _Ended(ABNORMAL_CLOSURE, reason, welcomed=session.welcome is not None)
                wait = self.silence_timeout_s - silent_for
                ack_in = session.seconds_until_ack()
                if ack_in is not None:
                    wait = min(wait, ack_in)
                try:
                    async with asyncio.timeout(wait):
                        message = await ws.recv()  # cancelling recv() loses no message (websockets docs)
                except TimeoutError:
                    for frame in session.due_acks():
                        await ws.send(frame)
                    continue
                last_heard = time.monotonic()
                welcomed_before = session.welcome is not None
                reaction = session.handle(message)
                if not welcomed_before and session.welcome is not None:
                    welcome = session.welcome
                    logger.info("welcome: head seq %d, last seq here %d, recovered %s%s", welcome.head_seq,
                                session.last_seq, welcome.recovered, f" ({welcome.reset})" if welcome.reset else "")
                self._queue_applied(reaction.applied)  # before any await: applied is applied, even if sends fail
                for frame in reaction.send:
                    await ws.send(frame)
                self._progress.set()
                if reaction.gap is not None:
                    reason = f"gap: expected seq {reaction.gap.expected}, got {reaction.gap.got}; resuming"
                    await ws.close(CLIENT_GAP_CLOSE, reason)
                    return _Ended(CLIENT_GAP_CLOSE, reason, welcomed=True, client_gap=True)
                if reaction.protocol_error is not None:
                    await ws.close(CLIENT_PROTOCOL_ERROR_CLOSE, close_reason(reaction.protocol_error))
                    return _Ended(CLIENT_PROTOCOL_ERROR_CLOSE, reaction.protocol_error,
                                  welcomed=session.welcome is not None, client_refused_frame=True)
                if await self._wait_for_room():
                    last_heard = time.monotonic()  # the server was not silent: this client did not read
        except ConnectionClosed as closed:
            if self._stop.is_set():
                return _Ended(closed.sent.code if closed.sent else ABNORMAL_CLOSURE, "stopped", True, stopped=True)
            rcvd = closed.rcvd
            code, reason = (rcvd.code, rcvd.reason) if rcvd is not None else (ABNORMAL_CLOSURE, str(closed))
            return _Ended(code, reason, welcomed=session.welcome is not None)
        finally:
            closer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await closer

    async def _close_when_stopped(self, ws: ClientConnection) -> None:
        await self._stop.wait()
        with contextlib.suppress(ConnectionClosed):
            for frame in self.session.final_acks():
                await ws.send(frame)
        await ws.close(1000, "client stopping")
