"""The gateway fan-out benchmark's load-generator clients: one connection per simulated client on a raw
asyncio transport (RFC 6455 framing by hand, optional permessage-deflate), speaking docs/protocol.md with
little per-frame work. Runs in the worker processes (``_fanout_loadgen``), which it knows only as a ``Worker``."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
import zlib
from dataclasses import dataclass
from typing import Any, Protocol, cast

ENTRIES_PREFIX = b'{"type":"entries"'
# encode_entry writes {"seq":N,"processingId":...,"key":...,"data":{...},"commitMs":N,"digest":"..."}; the
# bench payload ({"n":..,"pad":"x.."}) cannot contain either pattern. commitMs may be followed by more fields.
SEQ_RE = re.compile(rb'\{"seq":(\d+),"processingId"')
COMMIT_RE = re.compile(rb'"commitMs":(\d+)[,}]')


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


class Worker(Protocol):
    """What a connection needs of the worker process that runs it (``_fanout_loadgen.LoadGen``): its loop,
    its counters and statistics, and to be told when the client reached the target seq or lost its
    connection. Declared here so that the clients do not import the worker, which imports them."""

    loop: asyncio.AbstractEventLoop
    measuring: bool
    target: int
    errors: list[str]
    bytes_in: int
    frames_in: int
    acks: int
    deflate_negotiated: int

    def record(self, latency_ms: float, count: int) -> None: ...

    def reached(self, state: ClientState) -> None: ...

    def lost(self, protocol: LoadClient) -> None: ...


class LoadClient(asyncio.Protocol):
    """One connection of a client on a raw transport: RFC 6455 framing by hand (server frames are
    unmasked, client frames masked), optional permessage-deflate like a browser offers it."""

    def __init__(self, gen: Worker, state: ClientState, request: bytes, accept: bytes) -> None:
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
