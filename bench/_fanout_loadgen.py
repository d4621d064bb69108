"""The gateway fan-out benchmark's load-generator processes: the clients of one worker (``LoadGen``), its
share of the statistics, and the command loop the main process drives over a pipe."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import multiprocessing
import multiprocessing.connection
import random
import resource
import time
from typing import Any

from _fanout_client import ClientState, LoadClient
from _fanout_shared import HIST_PER_MS, HIST_SIZE, STREAM

from sparkwire.protocol.close_codes import CLOSE_SPECS

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NEVER = 1 << 62  # the target seq while no phase is being measured
CONNECT_CONCURRENCY = 64
# The protocol's table, not a copy: a close that is not resumable ends the client.
TERMINAL_CLOSES = frozenset(int(code) for code, spec in CLOSE_SPECS.items() if not spec.resumable)
MAX_ATTEMPTS = 30


class LoadGen:
    """The clients of one worker process and its share of the statistics. A client closed by the server
    with a resumable code reconnects with its session and cursor, as docs/protocol.md asks of clients
    (full-jitter backoff from 0.5 s doubling, immediately after 1001)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.host = "127.0.0.1"
        self.port = 0
        self.deflate = False
        self.states: list[ClientState] = []
        self.measuring = False
        self.disconnecting = False
        self.hist = [0] * HIST_SIZE
        self.target = NEVER
        self.pending: set[ClientState] = set()
        self.all_reached = asyncio.Event()
        self.reached_at = 0.0
        self.errors: list[str] = []
        self.close_codes: dict[int, int] = {}
        self.deflate_negotiated = 0
        self.bytes_in = 0
        self.frames_in = 0
        self.acks = 0
        self.semaphore = asyncio.Semaphore(CONNECT_CONCURRENCY)
        self.cpu0 = 0.0
        self.tasks: set[asyncio.Task[bool]] = set()  # reconnects in progress (kept referenced)
        self.retried_connects = 0

    def record(self, latency_ms: float, count: int) -> None:
        bucket = int(latency_ms * HIST_PER_MS)
        self.hist[0 if bucket < 0 else min(bucket, HIST_SIZE - 1)] += count

    def reached(self, state: ClientState) -> None:
        if state in self.pending:
            self.pending.discard(state)
            if not self.pending:
                self.reached_at = time.time()
                self.all_reached.set()

    def lost(self, protocol: LoadClient) -> None:
        state = protocol.state
        current = state.protocol is protocol
        if current and (protocol.established or self.disconnecting):
            state.protocol = None
        if self.disconnecting:
            return
        code = protocol.close_code if protocol.close_code is not None else 1006
        self.close_codes[code] = self.close_codes.get(code, 0) + 1
        if not current or not protocol.established:
            return  # lost while connecting: _open reports the failure and _reconnect retries
        if code in TERMINAL_CLOSES:
            self._give_up(state, f"closed with terminal code {code}")
            return
        state.reconnects += 1
        delay = 0.0 if code == 1001 else random.uniform(0, 0.5)
        self.loop.call_later(delay, self._start_reconnect, state)

    def _start_reconnect(self, state: ClientState) -> None:
        task = self.loop.create_task(self._reconnect(state))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _give_up(self, state: ClientState, why: str) -> None:
        state.dead = True
        self.errors.append(why)
        self.reached(state)  # it will not reach the target: stop waiting for it

    async def _reconnect(self, state: ClientState) -> bool:
        backoff = 0.5
        while not self.disconnecting:
            if await self._open(state):
                return True
            state.attempts += 1
            if state.attempts >= MAX_ATTEMPTS:
                self._give_up(state, f"no connection after {MAX_ATTEMPTS} attempts")
                return False
            backoff = min(backoff * 2, 30.0)
            await asyncio.sleep(random.uniform(0, backoff))
        return False

    async def _open(self, state: ClientState) -> bool:
        """One connection for ``state`` up to welcome (resumed) or snapshot; False if it failed."""
        key = base64.b64encode(random.randbytes(16))
        accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())
        request = (
            b"GET /ws?stream=%s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n"
        ) % (STREAM.encode(), self.host.encode(), self.port, key,
             b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" if self.deflate else b"")
        async with self.semaphore:
            protocol: LoadClient | None = None
            try:
                _, made = await asyncio.wait_for(self.loop.create_connection(
                    lambda: LoadClient(self, state, request, accept), self.host, self.port), 15)
                state.protocol = protocol = made
                await asyncio.wait_for(made.ready, 30)
                state.attempts = 0
                return True
            except Exception as error:
                if len(self.errors) < 100:
                    self.errors.append(f"connect: {type(error).__name__}: {error}")
                if protocol is not None:
                    if state.protocol is protocol:
                        state.protocol = None
                    if protocol.transport is not None:
                        protocol.transport.abort()
                return False

    async def connect(self, host: str, port: int, count: int, deflate: bool) -> dict[str, Any]:
        self.host, self.port, self.deflate = host, port, deflate
        self.disconnecting = False
        started = time.monotonic()
        self.deflate_negotiated = 0
        self.close_codes.clear()
        states = [ClientState() for _ in range(count)]

        async def first(state: ClientState) -> bool:  # a client that fails to connect retries, like a browser
            if await self._open(state):
                return True
            self.retried_connects += 1
            return await self._reconnect(state)

        self.retried_connects = 0
        opened = await asyncio.gather(*(first(state) for state in states))
        self.states = [s for s, ok in zip(states, opened, strict=True) if ok]
        failures = [e for e in self.errors if e.startswith("connect:")]
        self.errors.clear()
        result = {"connected": len(self.states), "failures": failures[:5], "failed": count - len(self.states),
                  "retried": self.retried_connects, "deflate": self.deflate_negotiated,
                  "close_codes": dict(self.close_codes), "seconds": time.monotonic() - started}
        self.close_codes.clear()
        return result

    def phase_start(self) -> dict[str, Any]:
        for state in self.states:
            state.phase_seq = state.last_seq
            state.received = 0
            state.reconnects = 0
        self.hist = [0] * HIST_SIZE
        self.bytes_in = self.frames_in = self.acks = 0
        self.measuring = True
        self.cpu0 = _own_cpu()
        return {"t": time.time()}

    async def phase_end(self, head: int, timeout: float) -> dict[str, Any]:
        self.pending = {s for s in self.states if not s.dead and s.last_seq < head}
        self.all_reached.clear()
        self.target = head
        self.reached_at = time.time()
        if self.pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_reached.wait(), timeout)
        self.measuring = False
        self.target = NEVER
        cpu = _own_cpu() - self.cpu0
        states = self.states
        complete = [s for s in states if not s.dead and s.last_seq == head
                    and not (s.duplicates or s.gaps or s.disorders or s.resets)]
        result = {
            "clients": len(states),
            "complete": len(complete),
            "received": sum(s.received for s in states),
            "expected": sum(max(head - s.phase_seq, 0) for s in states),
            "duplicates": sum(s.duplicates for s in states),
            "gaps": sum(s.gaps for s in states),
            "disorders": sum(s.disorders for s in states),
            "resets": sum(s.resets for s in states),
            "reconnects": sum(s.reconnects for s in states),
            "dead": sum(1 for s in states if s.dead),
            "errors": self.errors[:5],  # since the previous report: closes in a warm-up count too
            "close_codes": dict(self.close_codes),
            "reached_at": self.reached_at if not self.pending else None,
            "behind": len(self.pending),
            "cpu": cpu,
            "bytes": self.bytes_in,
            "frames": self.frames_in,
            "acks": self.acks,
            "hist": {i: n for i, n in enumerate(self.hist) if n},
        }
        self.pending = set()
        self.errors.clear()
        self.close_codes.clear()
        return result

    async def disconnect(self) -> dict[str, Any]:
        self.disconnecting = True
        protocols = [s.protocol for s in self.states if s.protocol is not None]
        for protocol in protocols:
            protocol.send(0x8, (1000).to_bytes(2, "big"))
        deadline = time.monotonic() + 10
        while any(s.protocol is not None for s in self.states) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for state in self.states:
            if state.protocol is not None and state.protocol.transport is not None:
                state.protocol.transport.abort()
        closed = len(self.states)
        self.states = []
        return {"closed": closed}

    async def ack_sweeper(self) -> None:
        """Acks that are due by time alone (no entry arrived since the interval passed)."""
        while True:
            await asyncio.sleep(0.25)
            now = time.time()
            for state in self.states:
                protocol = state.protocol
                if state.unacked and protocol is not None and protocol.established and (
                        now - state.ack_at >= state.ack_interval):
                    protocol.ack(now)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _serve(conn: multiprocessing.connection.Connection) -> None:
    loop = asyncio.get_running_loop()
    gen = LoadGen(loop)
    sweeper = asyncio.create_task(gen.ack_sweeper())
    try:
        while True:
            command, *params = await loop.run_in_executor(None, conn.recv)
            if command == "exit":
                conn.send({})
                return
            if command == "connect":
                result = await gen.connect(*params)
            elif command == "phase_start":
                result = gen.phase_start()
            elif command == "phase_end":
                result = await gen.phase_end(*params)
            elif command == "disconnect":
                result = await gen.disconnect()
            else:
                raise ValueError(f"unknown command {command!r}")
            conn.send(result)
    finally:
        sweeper.cancel()


def worker_main(conn: multiprocessing.connection.Connection) -> None:
    try:
        import uvloop
    except ImportError:  # plain asyncio works too, with more CPU per frame
        asyncio.run(_serve(conn))
    else:
        uvloop.run(_serve(conn))
