"""Gateway fan-out: delivered entries per gateway CPU second, commit->receive latency and memory per
connection, one gateway pod serving 1k and 5k WebSocket clients.

Starts its own ``redis-server`` (``sparkwire.stack.RedisServer``: AOF, ``appendfsync always``) and, per
client count, a fresh gateway (``sparkwire.stack.GatewayProcess``: ``sparkwire gateway`` under uvicorn,
one process = one pod, default options). Commits go through the real commit script
(``sparkwire.stack.Committer``, 100-byte payloads), one commit every ``--commit-interval-ms``, at several
rates. The clients run in ``--workers`` load-generator processes, each one event loop (uvloop) of raw
WebSocket clients that speak the protocol (hello, welcome, snapshot, entries, coalesced acks, pongs, and
a reconnect with session and cursor after a resumable close) with little per-frame work: the seqs and
commit times are taken out of an ``entries`` frame with two regular expressions instead of a JSON parse,
so the load generator is not the bottleneck.

Per run: entries delivered, gateway CPU seconds (utime+stime from /proc/<pid>/stat), delivery latency
(receive time in the client - the entry's ``commitMs``), load-generator and Redis CPU; every client must
receive every seq exactly once, in order, up to the last one committed, or the run is marked failed.
Memory per idle connection: gateway RSS with N clients connected (after welcome and snapshot, no traffic)
minus RSS before they connected, over N. Each set of runs is repeated per ``--variants`` entry: the
gateway as deployed, then with a larger redis-py connection pool. The results go into a marked section
of docs/benchmarks.md.

    .venv/bin/python bench/gateway_fanout.py           # the whole table, about 5 minutes
    .venv/bin/python bench/gateway_fanout.py --quick   # smoke run, about 30 seconds
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import resource
import shlex
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from _common import (
    git_revision,
    int_list,
    machine_info,
    markers,
    process_cpu_seconds,
    process_memory_kib,
    write_section,
)

from sparkwire.replaylog.keys import StreamKeys
from sparkwire.stack import Committer, GatewayProcess, RedisServer, repo_root

SECTION = "gateway_fanout"
START_MARKER, END_MARKER = markers(SECTION)
STREAM = "bench"
PAYLOAD_BYTES = 100
POOL_VARIANT = "max_connections=10000"
CENTRIFUGO_PER_CPU = 12_500
LATENCY_AIM_MS = 20.0
MEMORY_AIM_KB = 20.0

# --- load generator (runs in the worker processes) --------------------------------------------------

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
ENTRIES_PREFIX = b'{"type":"entries"'
# encode_entry writes {"seq":N,"processingId":...,"key":...,"data":{...},"commitMs":N}; the bench payload
# ({"n":..,"pad":"x.."}) cannot contain either pattern.
SEQ_RE = re.compile(rb'\{"seq":(\d+),"processingId"')
COMMIT_RE = re.compile(rb'"commitMs":(\d+)\}')
HIST_PER_MS = 10  # latency histogram: 0.1 ms buckets
HIST_SIZE = 120_000 * HIST_PER_MS  # up to 120 s, the last bucket holds everything slower
NEVER = 1 << 62
CONNECT_CONCURRENCY = 64


TERMINAL_CLOSES = frozenset({1000, 1003, 1008, 1009, 4400, 4401, 4403, 4404, 4426})  # docs/protocol.md
MAX_ATTEMPTS = 30


@dataclass(eq=False)
class ClientState:
    """What one simulated client keeps across its connections: position, session, counts."""

    session: str | None = None
    epoch: str = ""
    last_seq: int = -1
    phase_seq: int = 0
    received: int = 0
    duplicates: int = 0
    gaps: int = 0
    disorders: int = 0
    resets: int = 0
    reconnects: int = 0
    attempts: int = 0
    unacked: int = 0
    ack_at: float = 0.0
    ack_every: int = 100
    ack_interval: float = 1.0
    dead: bool = False
    protocol: LoadClient | None = None

    def hello(self) -> bytes:
        frame: dict[str, object] = {"type": "hello", "v": 1}
        if self.session is not None:
            frame["session"] = self.session
            frame["cursor"] = {"epoch": self.epoch, "seq": max(self.last_seq, 0)}
        return json.dumps(frame, separators=(",", ":")).encode()


class LoadClient(asyncio.Protocol):
    """One connection of a client on a raw transport: RFC 6455 framing by hand (server frames are
    unmasked, client frames masked), optional permessage-deflate like a browser offers it."""

    def __init__(self, gen: LoadGen, state: ClientState, request: bytes, accept: bytes) -> None:
        self.gen = gen
        self.state = state
        self.request = request
        self.accept = accept
        self.transport: asyncio.Transport | None = None
        self.handshaken = False
        self.buf = bytearray()
        self.ready: asyncio.Future[None] = gen.loop.create_future()
        self.inflater: Any = None
        self.inflate_fresh = False  # server_no_context_takeover: a new inflater per message
        self.fragments: list[bytes] | None = None
        self.fragments_compressed = False
        self.close_code: int | None = None
        self.established = False  # ready: a loss from now on is the client's to recover from

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses
        self.transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"closed before ready (code {self.close_code})"))
        self.gen.lost(self)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        gen = self.gen
        gen.bytes_in += len(data)
        buf = self.buf
        buf += data
        if not self.handshaken:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[:end])
            del buf[: end + 4]
            self._handshake(head)
            if not self.handshaken:
                return
        pos, size = 0, len(buf)
        while size - pos >= 2:
            b0, length = buf[pos], buf[pos + 1]
            if length & 0x80:
                self._fail("server frame is masked")
                return
            start = pos + 2
            if length == 126:
                if size - pos < 4:
                    break
                length, start = int.from_bytes(buf[pos + 2 : pos + 4], "big"), pos + 4
            elif length == 127:
                if size - pos < 10:
                    break
                length, start = int.from_bytes(buf[pos + 2 : pos + 10], "big"), pos + 10
            end = start + length
            if end > size:
                break
            gen.frames_in += 1
            self._frame(b0, bytes(buf[start:end]), now)
            pos = end
        if pos:
            del buf[:pos]

    # -- WebSocket --

    def _handshake(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        if not lines[0].startswith(b"HTTP/1.1 101"):
            self._fail(f"upgrade refused: {lines[0][:80]!r}")
            return
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if headers.get(b"sec-websocket-accept") != self.accept:
            self._fail("bad Sec-WebSocket-Accept")
            return
        extensions = headers.get(b"sec-websocket-extensions", b"")
        if b"permessage-deflate" in extensions:
            self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            self.inflate_fresh = b"server_no_context_takeover" in extensions
            self.gen.deflate_negotiated += 1
        self.handshaken = True
        self.send(0x1, self.state.hello())

    def _frame(self, b0: int, payload: bytes, now: float) -> None:
        opcode = b0 & 0x0F
        if opcode in (0x1, 0x2):
            if not b0 & 0x80:  # fragmented message: collect until fin
                self.fragments, self.fragments_compressed = [payload], bool(b0 & 0x40)
                return
            if b0 & 0x40:
                payload = self._inflate(payload)
            self._message(payload, now)
        elif opcode == 0x0 and self.fragments is not None:
            self.fragments.append(payload)
            if b0 & 0x80:
                whole, self.fragments = b"".join(self.fragments), None
                self._message(self._inflate(whole) if self.fragments_compressed else whole, now)
        elif opcode == 0x9:
            self.send(0xA, payload)
        elif opcode == 0x8:
            self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
            self.send(0x8, payload[:2])
            if self.transport is not None:
                self.transport.close()

    def _inflate(self, payload: bytes) -> bytes:
        if self.inflater is None:
            self._fail("compressed frame without permessage-deflate")
            return b""
        if self.inflate_fresh:
            self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        return bytes(self.inflater.decompress(payload + b"\x00\x00\xff\xff"))

    def send(self, opcode: int, payload: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        n = len(payload)
        mask = random.randbytes(4)
        masked = (int.from_bytes(payload, "little") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "little"))
        header = bytes((0x80 | opcode, 0x80 | n)) if n < 126 else bytes((0x80 | opcode, 0xFE)) + n.to_bytes(2, "big")
        self.transport.write(header + mask + masked.to_bytes(n, "little"))

    def _fail(self, why: str) -> None:
        self.gen.errors.append(why)
        self.close_code = 1002
        if self.transport is not None:
            self.transport.abort()

    # -- protocol --

    def _message(self, payload: bytes, now: float) -> None:
        gen, state = self.gen, self.state
        if payload.startswith(ENTRIES_PREFIX):
            seqs = SEQ_RE.findall(payload)
            count = len(seqs)
            if not count:
                self._fail(f"entries frame without entries: {payload[:80]!r}")
                return
            first, last = int(seqs[0]), int(seqs[-1])
            if first != state.last_seq + 1 or last - first + 1 != count or (
                count > 2 and list(map(int, seqs)) != list(range(first, last + 1))
            ):
                self._misordered(first, last, count)
            if last > state.last_seq:
                state.last_seq = last
            state.received += count
            if gen.measuring:
                commits = COMMIT_RE.findall(payload)
                now_ms = now * 1000.0
                if commits[0] == commits[-1] and (count < 3 or len(set(commits)) == 1):
                    gen.record(now_ms - int(commits[0]), count)
                else:
                    for commit in set(commits):
                        gen.record(now_ms - int(commit), commits.count(commit))
            state.unacked += count
            if state.unacked >= state.ack_every or now - state.ack_at >= state.ack_interval:
                self.ack(now)
            if state.last_seq >= gen.target:
                gen.reached(state)
            return
        frame = json.loads(payload)
        kind = frame.get("type")
        if kind == "welcome":
            state.ack_every, state.ack_interval = frame["ackEvery"], frame["ackIntervalMs"] / 1000
            state.epoch = frame["epoch"]
            resumed = state.session is not None
            state.session = frame["session"]
            if frame["recovered"]:
                state.ack_at = now
                self._established()
            elif resumed:
                state.resets += 1  # a snapshot instead of the entries missed: not exactly once
        elif kind == "snapshot":
            if not frame["more"]:
                state.last_seq = frame["seq"]
                state.epoch = frame["epoch"]
                state.ack_at = now
                if not self.ready.done():
                    self._established()
        elif kind == "ping":
            self.send(0x1, b'{"type":"pong","t":%d}' % frame["t"])
        elif kind == "error":
            gen.errors.append(f"error frame: {payload[:200]!r}")

    def _established(self) -> None:
        self.established = True
        self.ready.set_result(None)

    def _misordered(self, first: int, last: int, count: int) -> None:
        """Not exactly once: a repeat, a hole or a disorder. Counted; the client keeps its highest seq."""
        state = self.state
        if first <= state.last_seq:
            state.duplicates += 1
        elif first > state.last_seq + 1:
            state.gaps += 1
        else:
            state.disorders += 1
        self.gen.errors.append(f"client at seq {state.last_seq} got seqs {first}..{last} ({count} entries)")

    def ack(self, now: float) -> None:
        state = self.state
        if state.last_seq < 0:
            return
        self.send(0x1, b'{"type":"ack","seq":%d,"duplicates":%d,"gaps":%d}' % (
            state.last_seq, state.duplicates, state.gaps))
        state.unacked = 0
        state.ack_at = now
        self.gen.acks += 1


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
                _, protocol = await asyncio.wait_for(self.loop.create_connection(
                    lambda: LoadClient(self, state, request, accept), self.host, self.port), 15)
                state.protocol = protocol
                await asyncio.wait_for(protocol.ready, 30)
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


# --- orchestration (main process) -------------------------------------------------------------------


class Workers:
    """The load-generator processes; each command goes to all of them and their answers come back."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[multiprocessing.connection.Connection] = []
        self.processes = []
        for index in range(count):
            parent, child = context.Pipe()
            process = context.Process(target=worker_main, args=(child,), name=f"loadgen-{index}", daemon=True)
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)

    def call(self, *commands: tuple[Any, ...], timeout: float = 300) -> list[dict[str, Any]]:
        """Send ``commands[i]`` to worker i (one command for all if only one is given)."""
        for index, pipe in enumerate(self.pipes):
            pipe.send(commands[index] if len(commands) > 1 else commands[0])
        results = []
        deadline = time.monotonic() + timeout
        for pipe, process in zip(self.pipes, self.processes, strict=True):
            while not pipe.poll(0.5):
                if not process.is_alive():
                    raise RuntimeError(f"{process.name} exited with code {process.exitcode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{process.name} did not answer within {timeout:.0f} s")
            results.append(pipe.recv())
        return results

    def connect(self, port: int, clients: int, deflate: bool) -> dict[str, Any]:
        shares = [clients // len(self.pipes) + (1 if i < clients % len(self.pipes) else 0)
                  for i in range(len(self.pipes))]
        results = self.call(*[("connect", "127.0.0.1", port, share, deflate) for share in shares])
        codes: dict[int, int] = {}
        for r in results:
            for code, n in r["close_codes"].items():
                codes[code] = codes.get(code, 0) + n
        return {"connected": sum(r["connected"] for r in results), "failed": sum(r["failed"] for r in results),
                "failures": [f for r in results for f in r["failures"]][:5],
                "retried": sum(r["retried"] for r in results), "deflate": sum(r["deflate"] for r in results),
                "close_codes": codes, "seconds": max(r["seconds"] for r in results)}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(("exit",), timeout=15)
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.kill()


@dataclass
class Phase:
    """One measured run: ``clients`` connected clients, commits at ``rate`` entries/s."""

    clients: int
    deflate: bool
    variant: str
    rate: int
    per_commit: int
    commits: int = 0
    committed: int = 0
    commit_seconds: float = 0.0
    wall: float = 0.0
    gateway_cpu: float = 0.0
    redis_cpu: float = 0.0
    loadgen_cpu: float = 0.0
    received: int = 0
    expected: int = 0
    complete: int = 0
    resets: int = 0
    reconnects: int = 0
    dead: int = 0
    behind: int = 0
    duplicates: int = 0
    gaps: int = 0
    disorders: int = 0
    frames: int = 0
    acks: int = 0
    bytes: int = 0
    gateway_counted: float = 0.0
    errors: list[str] = field(default_factory=list)
    close_codes: dict[int, int] = field(default_factory=dict)
    hist: dict[int, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return _label(self.variant, self.deflate)

    @property
    def exactly_once(self) -> bool:
        return (0 < self.complete == self.clients and 0 < self.received == self.expected and not self.behind
                and not (self.duplicates or self.gaps or self.disorders or self.resets or self.dead))

    @property
    def commit_rate(self) -> float:
        return self.committed / self.commit_seconds if self.commit_seconds else 0.0

    @property
    def delivered_per_s(self) -> float:
        return self.received / self.wall if self.wall else 0.0

    @property
    def per_cpu(self) -> float:
        return self.received / self.gateway_cpu if self.gateway_cpu else float("inf")

    def latency_ms(self, q: float) -> float:
        total = sum(self.hist.values())
        if not total:
            return float("nan")
        rank = max(1, -(-q * total // 1))  # nearest rank
        seen = 0
        for bucket in sorted(self.hist):
            seen += self.hist[bucket]
            if seen >= rank:
                return (bucket + 1) / HIST_PER_MS  # upper edge of the 0.1 ms bucket
        return float("nan")

    @property
    def latency_max_ms(self) -> float:
        return (max(self.hist) + 1) / HIST_PER_MS if self.hist else float("nan")


@dataclass
class Memory:
    clients: int
    deflate: bool
    variant: str
    connected: int
    connect_seconds: float
    before: dict[str, int]
    after: dict[str, int]
    retried: int = 0
    deflate_negotiated: int = 0
    close_codes: dict[int, int] = field(default_factory=dict)
    after_runs: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return _label(self.variant, self.deflate)

    def per_connection_kb(self, field_name: str = "VmRSS", after: dict[str, int] | None = None) -> float:
        after = self.after if after is None else after
        return (after[field_name] - self.before[field_name]) * 1024 / 1000 / max(self.connected, 1)


@dataclass
class Scenario:
    """One gateway start: ``clients`` clients, a run per rate; ``variant`` = query string of the gateway's
    Redis URL (redis-py pool options), "" = as deployed."""

    clients: int
    deflate: bool
    rates: list[int]
    variant: str


def _label(variant: str, deflate: bool) -> str:
    return (f"pool {variant}" if variant else "as deployed") + (", deflate" if deflate else "")


def pace(committer: Committer, per_commit: int, interval: float, seconds: float) -> tuple[int, float]:
    """Commit ``per_commit`` records every ``interval`` seconds for ``seconds`` (fixed schedule: a slow
    commit is followed by the next one at once); returns (commits, elapsed)."""
    committer.per_batch = per_commit
    started = time.perf_counter()
    commits = 0
    while commits * interval < seconds:
        delay = started + commits * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        committer.commit()
        commits += 1
    return commits, time.perf_counter() - started


def head_seq(server: RedisServer) -> int:
    with server.client() as client:
        return int(client.hget(StreamKeys(STREAM).meta, "last_seq") or 0)


def delivered_counter(gateway: GatewayProcess) -> float:
    """The gateway's own count of entries sent (a cross-check, printed only); NaN if it does not answer."""
    try:
        return gateway.metric("sparkwire_gateway_entries_delivered_total")
    except OSError:
        return float("nan")


def settle_rss(pid: int, seconds: float = 2.0) -> dict[str, int]:
    """Memory once RSS stopped moving (or after ``seconds``)."""
    deadline = time.monotonic() + seconds
    previous = process_memory_kib(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        current = process_memory_kib(pid)
        if abs(current["VmRSS"] - previous["VmRSS"]) < 64:
            return current
        previous = current
    return previous


def run_phase(args: argparse.Namespace, server: RedisServer, gateway: GatewayProcess, workers: Workers,
              committer: Committer, scenario: Scenario, clients: int, rate: int) -> Phase:
    interval = args.commit_interval_ms / 1000
    per_commit = max(1, round(rate * interval))
    phase = Phase(clients=clients, deflate=scenario.deflate, variant=scenario.variant, rate=rate,
                  per_commit=per_commit)
    pace(committer, per_commit, interval, args.warmup)
    gateway_pid, redis_pid = gateway.process.pid, server.process.pid
    assert gateway_pid is not None and redis_pid is not None
    counted_before = delivered_counter(gateway)
    gateway_cpu0, redis_cpu0 = process_cpu_seconds(gateway_pid), process_cpu_seconds(redis_pid)
    started = [r["t"] for r in workers.call(("phase_start",))]
    t0 = max(started)
    phase.commits, phase.commit_seconds = pace(committer, per_commit, interval, args.duration)
    phase.committed = phase.commits * per_commit
    head = head_seq(server)
    results = workers.call(("phase_end", head, args.catch_up_timeout), timeout=args.catch_up_timeout + 120)
    gateway_cpu1, redis_cpu1 = process_cpu_seconds(gateway_pid), process_cpu_seconds(redis_pid)
    reached = [r["reached_at"] for r in results]
    t1 = max(r for r in reached if r is not None) if all(r is not None for r in reached) else time.time()
    phase.wall = t1 - t0
    phase.gateway_cpu = gateway_cpu1 - gateway_cpu0
    phase.redis_cpu = redis_cpu1 - redis_cpu0
    phase.gateway_counted = delivered_counter(gateway) - counted_before
    phase.clients = sum(r["clients"] for r in results)
    for r in results:
        phase.loadgen_cpu += r["cpu"]
        phase.received += r["received"]
        phase.expected += r["expected"]
        phase.resets += r["resets"]
        phase.reconnects += r["reconnects"]
        phase.dead += r["dead"]
        phase.complete += r["complete"]
        phase.behind += r["behind"]
        phase.duplicates += r["duplicates"]
        phase.gaps += r["gaps"]
        phase.disorders += r["disorders"]
        phase.frames += r["frames"]
        phase.acks += r["acks"]
        phase.bytes += r["bytes"]
        phase.errors += r["errors"]
        for code, n in r["close_codes"].items():
            phase.close_codes[code] = phase.close_codes.get(code, 0) + n
        for bucket, n in r["hist"].items():
            phase.hist[bucket] = phase.hist.get(bucket, 0) + n
    print(
        f"[{phase.label}] clients={clients:<5} rate={rate:<5} delivered {phase.delivered_per_s:>10,.0f}/s"
        f"  gateway cpu {phase.gateway_cpu:5.2f}s ({phase.per_cpu:,.0f}/cpu-s)  p50 {phase.latency_ms(0.5):.1f}"
        f" p99 {phase.latency_ms(0.99):.1f} max {phase.latency_max_ms:.1f} ms  loadgen cpu {phase.loadgen_cpu:.2f}s"
        f"  exactly once {'yes' if phase.exactly_once else 'NO'} ({phase.complete}/{phase.clients} complete,"
        f" {phase.received:,}/{phase.expected:,} entries, gateway counted {phase.gateway_counted:,.0f};"
        f" {phase.frames:,} frames, {phase.acks:,} acks;"
        f" reconnects {phase.reconnects}, snapshot resets {phase.resets}, gave up {phase.dead})",
        file=sys.stderr,
    )
    for error in phase.errors:
        print(f"  error: {error}", file=sys.stderr)
    if phase.close_codes:
        print(f"  closed by the server: {phase.close_codes}", file=sys.stderr)
    return phase


def run_scenario(args: argparse.Namespace, workdir: Path, server: RedisServer, workers: Workers,
                 committer: Committer, scenario: Scenario) -> tuple[Memory, list[Phase]]:
    url = f"{server.url}?{scenario.variant}" if scenario.variant else server.url
    extra = [*args.gateway_arg, *(["--per-message-deflate", "true"] if scenario.deflate else [])]
    started = time.monotonic()

    def step(what: str) -> None:
        if args.verbose:
            print(f"  {time.monotonic() - started:6.1f}s {what}", file=sys.stderr)

    gateway = GatewayProcess(workdir, url, [STREAM], *extra).start()
    try:
        pid = gateway.process.pid
        assert pid is not None
        step("gateway ready")
        pace(committer, 1, 0.05, 0.5)  # the hub follows the stream; its ring holds a few entries
        workers.connect(gateway.port, 20, scenario.deflate)  # first connections load lazy code paths
        workers.call(("disconnect",))
        time.sleep(0.5)
        before = settle_rss(pid)
        step("warm-up connections done")
        connected = workers.connect(gateway.port, scenario.clients, scenario.deflate)
        step("clients connected")
        if connected["failed"]:
            print(f"  {connected['failed']} clients failed to connect: {connected['failures']}", file=sys.stderr)
        after = settle_rss(pid, 3.0)
        memory = Memory(scenario.clients, scenario.deflate, scenario.variant, connected["connected"],
                        connected["seconds"], before, after, connected["retried"], connected["deflate"],
                        connected["close_codes"])
        print(
            f"[{memory.label}] clients={scenario.clients:<5} connected {connected['connected']} in"
            f" {connected['seconds']:.1f}s ({connected['retried']} retried, server closes"
            f" {connected['close_codes'] or 'none'}, deflate negotiated {connected['deflate']}); idle RSS"
            f" {before['VmRSS'] / 1024:.1f} -> {after['VmRSS'] / 1024:.1f} MiB = {memory.per_connection_kb():.1f} KB"
            " per connection",
            file=sys.stderr,
        )
        phases = [run_phase(args, server, gateway, workers, committer, scenario, connected["connected"], rate)
                  for rate in scenario.rates]
        memory.after_runs = process_memory_kib(pid)
        workers.call(("disconnect",))
        step("clients disconnected")
        if not all(p.exactly_once for p in phases):
            print(f"gateway log ({gateway.process.log_path}) ends with:\n{gateway.process.log_tail(60)}",
                  file=sys.stderr)
        return memory, phases
    finally:
        gateway.stop()
        step("gateway stopped")
        if args.logs is not None:
            args.logs.mkdir(parents=True, exist_ok=True)
            name = f"gateway-{scenario.clients}-{_label(scenario.variant, scenario.deflate)}.log"
            shutil.copyfile(gateway.process.log_path, args.logs / name.replace(" ", "_").replace(",", ""))


# --- report -----------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:,.1f}"


def _closes(codes: dict[int, int]) -> str:
    return ", ".join(f"{n:,}x {code}" for code, n in sorted(codes.items())) or "none"


def _variant_title(variant: str) -> str:
    if not variant:
        return "as deployed (a blocking pool of `--redis-pool-size` connections; acks written in batches)"
    return f"variant: the gateway's `--redis-url` ends in `?{variant}`"


def _aims(phases: list[Phase], memories: list[Memory]) -> list[str]:
    """Each aim of issue 3 against the measured numbers, computed (so the text stays true)."""
    out = ["### Against the aims", ""]
    for variant in dict.fromkeys(p.variant for p in phases):
        runs = [p for p in phases if p.variant == variant and not p.deflate]
        small = [p for p in runs if p.clients <= 1000]
        label = "as deployed" if not variant else f"with `?{variant}`"
        if small:
            met = [p for p in small if p.latency_ms(0.99) <= LATENCY_AIM_MS and p.exactly_once]
            missed = [p for p in small if p not in met]
            verdict = "**met**" if not missed else "**not met**" if not met else "**met only in part**"
            out.append(
                f"- p99 commit->receive <= {LATENCY_AIM_MS:.0f} ms at {max(p.clients for p in small):,} clients on"
                f" one pod, {label}: {verdict}"
                + (f"; met at {', '.join(f'{p.rate:,}/s (p99 {_ms(p.latency_ms(0.99))} ms)' for p in met)}"
                   if met else "")
                + (f"; missed at {', '.join(f'{p.rate:,}/s (p99 {_ms(p.latency_ms(0.99))} ms)' for p in missed)}"
                   if missed else "")
                + "."
            )
        if runs:
            best = max(runs, key=lambda p: p.per_cpu)
            # like with like: runs whose frames carried about one entry each (an overloaded gateway batches
            # several commits into one frame, and replays after reconnects come in large frames)
            single = [p for p in runs if p.frames and p.received / p.frames <= 1.2]
            out.append(
                f"- Delivered entries per gateway CPU second, {label}, vs Centrifugo's ~{CENTRIFUGO_PER_CPU:,}"
                f" messages/s per CPU: best {best.per_cpu:,.0f} ({best.per_cpu / CENTRIFUGO_PER_CPU:.1f}x) at"
                f" {best.clients:,} clients with {best.per_commit} entries per commit"
                f" ({best.received / best.frames if best.frames else 0:,.1f} per frame); "
                + ("at about one entry per frame, the closest to one Centrifugo message: "
                   + ", ".join(f"{p.per_cpu:,.0f} at {p.clients:,} clients and {p.rate:,}/s"
                               f" ({p.per_cpu / CENTRIFUGO_PER_CPU:.2f}x)" for p in single)
                   if single else "no run delivered about one entry per frame")
                + "."
            )
        closed = [p for p in phases if p.variant == variant and p.close_codes]
        if closed:
            out.append(
                f"- Server closes, {label}: " + "; ".join(
                    f"{p.clients:,} clients at {p.rate:,}/s: {_closes(p.close_codes)}, {p.reconnects:,} reconnects"
                    for p in closed)
                + " (the clients resumed from their cursors; the closes cost CPU and latency)."
            )
    seen: set[tuple[int, bool]] = set()
    for memory in memories:  # the pool variant does not change idle memory: first measurement per kind
        if (memory.clients, memory.deflate) in seen:
            continue
        seen.add((memory.clients, memory.deflate))
        kb = memory.per_connection_kb()
        verdict = "**met**" if kb <= MEMORY_AIM_KB else "**not met**"
        deflate = ", compression on and negotiated (`--per-message-deflate true`)" if memory.deflate else ""
        out.append(f"- <= {MEMORY_AIM_KB:.0f} KB per idle connection ({memory.connected:,} clients{deflate}):"
                   f" {verdict}, {kb:.1f} KB of gateway RSS per connection.")
    failed = [p for p in phases if not p.exactly_once]
    if failed:
        out.append("- **Not exactly once** in " + "; ".join(
            f"{p.clients:,} clients at {p.rate:,}/s, {p.label} ({p.complete:,}/{p.clients:,} complete,"
            f" {p.received:,}/{p.expected:,} entries, {p.behind} behind, {p.resets} snapshot resets,"
            f" {p.dead} gave up)" for p in failed) + ".")
    else:
        out.append("- Every client received every committed seq exactly once and in order, in every run"
                   " (across its reconnects, if any).")
    return out


def render(args: argparse.Namespace, command: str, info: dict[str, str], memories: list[Memory],
           phases: list[Phase], payload: str, entry_bytes: int, load_before: tuple[float, float, float],
           load_after: tuple[float, float, float], wall_seconds: float, date: str, revision: str) -> str:
    lines = [
        START_MARKER,
        "## Gateway fan-out: delivered entries per CPU second, commit->receive latency, memory per connection",
        "",
        "One gateway pod (`sparkwire gateway`: uvicorn, one process, uvloop, websockets-sansio) on a real",
        "`redis-server` (AOF, `appendfsync always`), N WebSocket clients connected to it, commits through the",
        "real commit script (`sparkwire.stack.Committer`) at a fixed cadence. *Delivered* counts entries",
        "received by clients (an entry sent to 1,000 clients counts 1,000 times); it is divided by the",
        "gateway's own CPU time (utime+stime of its process from `/proc/<pid>/stat`), so the efficiency",
        "figure does not depend on how much CPU the load generator or other work took from the machine.",
        "",
        f"Run {date}, {wall_seconds:.0f} s wall time. Reproduce with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- Gateway code: {revision}; gateway options: "
        + (f"`{' '.join(args.gateway_arg)}`" if args.gateway_arg else "defaults")
        + " (send queue 256 batches, ack every 100 entries or 1,000 ms, ring 10,000 entries), INFO logging;"
        " a fresh gateway per client count",
        f"- Commits: one `commit_batch` every {args.commit_interval_ms} ms (rate x"
        f" {args.commit_interval_ms / 1000:g} s entries each), {args.warmup:g} s warm-up, then {args.duration:g} s"
        f" measured; payload `{payload[:20]}…` = {len(payload)} bytes, about {entry_bytes} bytes per entry in an"
        " `entries` frame",
        f"- Clients: raw WebSocket clients in {args.workers} load-generator processes (one uvloop event loop"
        " each) on the same machine: hello without session, welcome, snapshot, then entries; acks coalesced as"
        " the welcome asks; pongs; on a resumable close, a reconnect with session and cursor (full-jitter"
        " backoff from 0.5 s, as docs/protocol.md asks). No permessage-deflate unless marked *deflate*"
        " (browsers offer it by default).",
        "- Exactly once: each client checks that the seqs of every frame continue its last seq without hole,"
        " repeat or disorder (across reconnects), and at the end of each run every client must have reached the"
        " last committed seq without a snapshot reset; received entries must equal the sum over clients of"
        " (last seq - seq at the run's start).",
        "- Latency: receive time in the load generator (`time.time()` when the frame's bytes arrived) minus"
        " the entry's `commitMs` (Redis `TIME` at the start of the commit script, truncated to the ms, so"
        " up to +1 ms); it includes the script, the AOF fsync, XREAD wake-up, the hub, the per-connection"
        " queue and send, loopback TCP and the load generator's own scheduling delay. 0.1 ms histogram,"
        " nearest rank.",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}; Redis"
        f" {info['redis']}, redis-py {info['redis_py']}, Python {info['python']}",
        f"- **The machine is shared**: load average {load_before[0]:.2f} / {load_before[1]:.2f} /"
        f" {load_before[2]:.2f} (1/5/15 min) before, {load_after[0]:.2f} after. The gateway, `redis-server`,"
        f" the committer and the load generator all run on these {info['nproc']} CPUs, next to other work;"
        " latency and delivered/s suffer from that, CPU seconds per entry much less.",
        "",
        "Columns: *rate* = commit rate asked for (measured), *per commit* = entries per commit; *delivered/s* =",
        "entries received by all clients per second of the run (first measured commit until the last client",
        "has the last seq); *gateway CPU* = its CPU seconds in the run and as a share of one CPU;",
        "*per gateway CPU s* = delivered / gateway CPU; *acks/s* = ack frames the clients sent (each one a",
        "session write to Redis by the gateway); *µs/frame* = gateway CPU per WebSocket frame the clients",
        "received (acks included); *load-gen* / *Redis* = CPU seconds of all load-generator processes / of",
        "`redis-server`; *server closes* = connections the gateway closed (count x close code) and the",
        "reconnects that followed; *exactly once* = clients complete / clients.",
    ]
    for variant in dict.fromkeys(p.variant for p in phases):
        lines += [
            "",
            f"### Delivery, {_variant_title(variant)}",
            "",
            "| clients | rate entries/s | per commit | delivered/s | frames/s | acks/s | gateway CPU s (%)"
            " | per gateway CPU s | µs/frame | p50 / p99 / max ms | load-gen / Redis CPU s | server closes (reconnects)"
            " | exactly once |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for p in (p for p in phases if p.variant == variant):
            deflate = " deflate" if p.deflate else ""
            once = f"{p.complete:,}/{p.clients:,}" + (" yes" if p.exactly_once else " **NO**")
            closes = _closes(p.close_codes) + (f" ({p.reconnects:,})" if p.close_codes else "")
            lines.append(
                f"| {p.clients:,}{deflate} | {p.rate:,} ({p.commit_rate:,.0f}) | {p.per_commit}"
                f" | {p.delivered_per_s:,.0f} | {p.frames / p.wall if p.wall else 0:,.0f}"
                f" | {p.acks / p.wall if p.wall else 0:,.0f}"
                f" | {p.gateway_cpu:.2f} ({p.gateway_cpu / p.wall if p.wall else 0:.0%}) | {p.per_cpu:,.0f}"
                f" | {p.gateway_cpu / p.frames * 1e6 if p.frames else float('nan'):,.0f}"
                f" | {_ms(p.latency_ms(0.5))} / {_ms(p.latency_ms(0.99))} / {_ms(p.latency_max_ms)}"
                f" | {p.loadgen_cpu:.2f} / {p.redis_cpu:.2f} | {closes} | {once} |"
            )
    lines += [
        "",
        "### Memory per connection",
        "",
        "Gateway RSS (`VmRSS`; PSS from `smaps_rollup` in brackets) before the clients connected (after 20",
        "warm-up connections came and went), with them connected and idle (after welcome and snapshot, no",
        "commits), and after the delivery runs with the clients still connected (this includes the pod's ring of",
        "up to 10,000 recent entries, so it is an upper bound per connection). Kernel socket buffers are not in",
        "these figures. *Connect* = seconds until all clients had their snapshot; connections the server",
        "closed while clients connected and retried are listed.",
        "",
        "| clients | gateway | RSS before MiB | RSS idle MiB | per idle connection KB | RSS after the runs MiB"
        " | per connection after the runs KB | connect s | server closes while connecting |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in memories:
        deflate = f", deflate ({m.deflate_negotiated:,} negotiated)" if m.deflate else ""
        after_runs = m.after_runs or m.after
        lines.append(
            f"| {m.connected:,} | {'as deployed' if not m.variant else f'`?{m.variant}`'}{deflate}"
            f" | {m.before['VmRSS'] / 1024:.1f} | {m.after['VmRSS'] / 1024:.1f}"
            f" | {m.per_connection_kb():.1f} ({m.per_connection_kb('Pss'):.1f}) | {after_runs['VmRSS'] / 1024:.1f}"
            f" | {m.per_connection_kb(after=after_runs):.1f} | {m.connect_seconds:.1f} | {_closes(m.close_codes)} |"
        )
    lines += ["", *_aims(phases, memories), ""]
    lines += [
        "Centrifugo reference: its published test (centrifugal.dev/blog/2020/02/10/million-connections-with-",
        "centrifugo) delivered about 500k messages/s to 1M connections from 20 server pods; issue 3 takes that",
        f"as about {CENTRIFUGO_PER_CPU:,} delivered messages/s per CPU. Each of its messages is a separate",
        "publication and frame (Protobuf protocol, a Go server); here an entry is one JSON object of a batched",
        "`entries` frame, so only runs with about one entry per frame compare like with like; larger commits",
        "(and an overloaded hub reading several commits at once) share a frame's cost among their entries.",
        END_MARKER,
    ]
    return "\n".join(lines) + "\n"


# --- main -------------------------------------------------------------------------------------------


def raise_open_files(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(f"need {needed} open files, the hard limit is {hard}: raise it (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))  # inherited by the gateway and the workers


def padding_for(target: int) -> int:
    """Committer pads ``{"n": n, "pad": "x..."}``; padding so that a 5-digit n gives ``target`` bytes."""
    return max(0, target - len(json.dumps({"n": 10_000, "pad": ""})))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--clients", type=int_list, default=[1000, 5000], help="client counts, e.g. 1000,5000")
    parser.add_argument("--rates", type=int_list, default=[10, 100, 500],
                        help="commit rates in entries/s, e.g. 10,100,500 (rate x interval entries per commit)")
    parser.add_argument("--commit-interval-ms", type=int, default=100, help="one commit this often")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds of commits per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds of commits before each run")
    parser.add_argument("--catch-up-timeout", type=float, default=60.0,
                        help="after the last commit, how long clients may take to receive it")
    parser.add_argument("--deflate-clients", type=int, default=1000,
                        help="one more gateway, started with --per-message-deflate true, with this many clients"
                             " offering permessage-deflate like a browser (memory and --deflate-rate); 0 skips it")
    parser.add_argument("--deflate-rate", type=int, default=100, help="commit rate of the deflate run")
    parser.add_argument("--workers", type=int, default=2, help="load-generator processes")
    parser.add_argument("--payload-bytes", type=int, default=PAYLOAD_BYTES, help="size of each entry's data")
    parser.add_argument("--gateway-arg", action="append", default=[],
                        help="extra option for `sparkwire gateway` (repeat; e.g. --gateway-arg=--send-queue=512)")
    parser.add_argument("--variants", type=lambda text: [v.strip() for v in text.split(",")],
                        default=[""],
                        help="query strings for the gateway's --redis-url (redis-py pool options), one set of runs"
                             f" each, '' = as deployed (the default); e.g. ',{POOL_VARIANT}' adds a run with a"
                             " larger pool")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 200 clients, rates 10,100, 3 s runs, 100 deflate clients")
    parser.add_argument("--verbose", action="store_true", help="print the time of each step")
    parser.add_argument("--logs", type=Path, help="copy each gateway's log into this folder")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks.md"), help="'-' for stdout only")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.rates, args.duration, args.warmup = [200], [10, 100], 3.0, 0.5
        args.deflate_clients = min(args.deflate_clients, 100)
    if args.workers < 1 or args.duration <= 0 or args.commit_interval_ms < 1:
        parser.error("--workers, --duration and --commit-interval-ms must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    command = shlex.join([".venv/bin/python", "bench/gateway_fanout.py", *argv])
    raise_open_files(max([*args.clients, args.deflate_clients]) + 1024)
    scenarios = [Scenario(n, False, args.rates, variant) for variant in args.variants for n in args.clients]
    if args.deflate_clients:
        scenarios.append(Scenario(args.deflate_clients, True, [args.deflate_rate], args.variants[-1]))
    load_before = os.getloadavg()
    wall_start = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    revision = git_revision(repo_root(), ["services/gateway", "services/replaylog", "services/stack"])
    memories: list[Memory] = []
    phases: list[Phase] = []
    workers = Workers(args.workers)
    try:
        with tempfile.TemporaryDirectory(prefix="sparkwire-bench-") as tmp, RedisServer(Path(tmp)) as server:
            client = server.client()
            info = machine_info(client)
            committer = Committer(client, STREAM, per_batch=1, payload_bytes=padding_for(args.payload_bytes))
            committer.commit()  # the stream exists (epoch, seq 1) before any gateway starts
            for scenario in scenarios:
                memory, scenario_phases = run_scenario(args, Path(tmp), server, workers, committer, scenario)
                memories.append(memory)
                phases += scenario_phases
            _, last = client.xrevrange(StreamKeys(STREAM).log, count=1)[0]
            payload = last[b"data"].decode()
            client.close()
    finally:
        workers.close()
    entry_bytes = len(f'{{"seq":{committer.committed},"processingId":"pid-{committer.committed:08d}","key":"k1",'
                      f'"data":{payload},"commitMs":{int(time.time() * 1000)}}}')
    section = render(args, command, info, memories, phases, payload, entry_bytes, load_before, os.getloadavg(),
                     time.monotonic() - wall_start, date, revision)
    if str(args.output) == "-":
        sys.stdout.write(section)
    else:
        write_section(args.output, SECTION, section)
        print(f"wrote section {SECTION!r} to {args.output}", file=sys.stderr)
    return 0 if all(p.exactly_once for p in phases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
