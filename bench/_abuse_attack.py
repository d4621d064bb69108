"""The churn of the abuse benchmark (``bench/abuse.py``), in a process of its own so that its event loop does
not share a GIL with the honest clients it is measured against: attack connections to one gateway on
127.0.0.1, started at ``--rate`` a second round-robin over ``KINDS`` for ``--seconds``, at most
``--max-in-flight`` open at once (a start that finds the cap reached is skipped and counted), each bounded
in time. Every ``--progress-seconds`` a JSON line ``{"t", "started", "done", "in_flight", "skipped"}`` is
appended to ``--progress``; at the end one JSON object goes to stdout: kind → how its connections ended →
count.

The secret the gateway checks tokens with comes in ``SPARKWIRE_AUTH_SECRET`` (valid tokens are needed to get
past the hello for ping floods and frames after the hello)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import jwt
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from sparkwire.gateway.auth.tokens import issue_token

Attack = Callable[["Target"], Awaitable[str]]


class Target:
    def __init__(self, port: int, stream: str, secret: str, hello_timeout_s: float, header_timeout_s: float,
                 pings: int) -> None:
        self.port = port
        self.pings = pings
        self.stream = stream
        self.secret = secret
        self.hello_timeout_s = hello_timeout_s
        self.header_timeout_s = header_timeout_s
        self.url = f"ws://127.0.0.1:{port}/ws?stream={stream}"
        self._token = ""
        self._token_until = 0.0

    def token(self) -> str:
        now = time.time()
        if now > self._token_until:
            self._token = issue_token(self.secret, [self.stream], 3_600, subject="churn", now=int(now))
            self._token_until = now + 600
        return self._token

    def hello(self, token: str | None) -> str:
        return json.dumps({"type": "hello", "v": 1, "token": token})


def _closed(error: ConnectionClosed) -> str:
    return f"close {error.rcvd.code}" if error.rcvd is not None else "dropped (no close frame)"


async def _open(target: Target) -> ClientConnection:
    return await connect(target.url, open_timeout=10, ping_interval=None, close_timeout=2, max_size=1 << 22)


async def _until_closed(ws: ClientConnection, limit: float) -> str:
    """Read (and drop) frames until the server closes; the close code, or ``open after`` at ``limit``."""
    try:
        async with asyncio.timeout(limit):
            while True:
                await ws.recv()
    except ConnectionClosed as error:
        return _closed(error)
    except TimeoutError:
        return f"still open after {limit:.0f} s"


async def _ws(target: Target, body: Callable[[ClientConnection], Awaitable[str]]) -> str:
    try:
        ws = await _open(target)
    except InvalidStatus as error:
        return f"http {error.response.status_code}"
    try:
        return await body(ws)
    except ConnectionClosed as error:
        return _closed(error)
    finally:
        await ws.close()


async def _hello_then(target: Target, token: str | None, then: Callable[[ClientConnection], Awaitable[str]]) -> str:
    async def body(ws: ClientConnection) -> str:
        await ws.send(target.hello(token))
        first = json.loads(await ws.recv())
        if first.get("type") != "welcome":
            return await _until_closed(ws, 5)
        return await then(ws)

    return await _ws(target, body)


async def no_hello(target: Target) -> str:
    return await _ws(target, lambda ws: _until_closed(ws, target.hello_timeout_s + 5))


async def slow_hello(target: Target) -> str:
    """A valid hello dribbled in fragments over 1.5 hello timeouts."""
    text = target.hello(target.token())
    parts = [text[i:i + 16] for i in range(0, len(text), 16)]
    pause = 1.5 * target.hello_timeout_s / len(parts)

    async def fragments() -> AsyncIterator[str]:
        for part in parts:
            yield part
            await asyncio.sleep(pause)

    async def body(ws: ClientConnection) -> str:
        await ws.send(fragments())
        return await _until_closed(ws, target.hello_timeout_s + 5)

    return await _ws(target, body)


async def late_hello(target: Target) -> str:
    """A valid hello, whole, at 80 % of the hello timeout: in time, so welcomed; then leave."""
    async def body(ws: ClientConnection) -> str:
        await asyncio.sleep(0.8 * target.hello_timeout_s)
        await ws.send(target.hello(target.token()))
        first = json.loads(await ws.recv())
        return "welcome, left" if first.get("type") == "welcome" else await _until_closed(ws, 5)

    return await _ws(target, body)


async def garbage_text(target: Target) -> str:
    async def body(ws: ClientConnection) -> str:
        await ws.send(random.choice(["GET / HTTP/1.1", "{not json", "[]", '{"type":"hello"', "\u0000" * 64]))
        return await _until_closed(ws, 5)

    return await _ws(target, body)


async def garbage_binary(target: Target) -> str:
    async def body(ws: ClientConnection) -> str:
        await ws.send(random.randbytes(256))
        return await _until_closed(ws, 5)

    return await _ws(target, body)


async def invalid_utf8(target: Target) -> str:
    async def body(ws: ClientConnection) -> str:
        await ws.send(b'{"type":"hello","v":1,"token":"\xff\xfe\xc3\x28"}', text=True)
        return await _until_closed(ws, 5)

    return await _ws(target, body)


async def invalid_utf8_after_hello(target: Target) -> str:
    async def then(ws: ClientConnection) -> str:
        await ws.send(b'{"type":"ping","t":1}\xff\x80', text=True)
        return await _until_closed(ws, 5)

    return await _hello_then(target, target.token(), then)


async def oversized_10k(target: Target) -> str:
    async def body(ws: ClientConnection) -> str:
        await ws.send(json.dumps({"type": "hello", "v": 1, "token": "x" * 10_240}))
        return await _until_closed(ws, 5)

    return await _ws(target, body)


async def oversized_100k(target: Target) -> str:
    async def then(ws: ClientConnection) -> str:
        await ws.send(json.dumps({"type": "ping", "t": 1, "pad": "x" * 102_400}))
        return await _until_closed(ws, 5)

    return await _hello_then(target, target.token(), then)


async def ping_flood(target: Target) -> str:
    """``--pings`` pings sent back to back after a valid hello, every pong read, then a normal close."""
    async def then(ws: ClientConnection) -> str:
        for t in range(target.pings):
            await ws.send(f'{{"type":"ping","t":{t}}}')
        pongs = 0
        async with asyncio.timeout(10):
            while pongs < target.pings:
                if json.loads(await ws.recv()).get("type") == "pong":
                    pongs += 1
        return "all pongs"

    try:
        return await _hello_then(target, target.token(), then)
    except TimeoutError:
        return "pongs missing after 10 s"


async def _http_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:] if line))
    return int(lines[0].split()[1]), headers


Posted = tuple[asyncio.StreamReader, asyncio.StreamWriter, int, dict[str, str]]


async def _post(path: str, port: int, body: bytes) -> Posted:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                 % (path.encode(), len(body)) + body)
    await writer.drain()
    status, headers = await _http_head(reader)
    return reader, writer, status, headers


async def sse_ping_flood(target: Target) -> str:
    """An SSE connection (POST /sse with a valid hello), then ``--pings`` pings in one POST /sse/frames body;
    the event stream read until every pong came."""
    reader, writer, status, headers = await _post(f"/sse?stream={target.stream}", target.port,
                                                  target.hello(target.token()).encode())
    writers = [writer]
    try:
        connection = headers.get("x-sparkwire-connection")
        if status != 200 or connection is None:
            return f"http {status}"
        body = b"\n".join(b'{"type":"ping","t":%d}' % t for t in range(target.pings))
        _, frames_writer, frames_status, _ = await _post(f"/sse/frames?connection={connection}",
                                                         target.port, body)
        writers.append(frames_writer)
        if frames_status != 204:
            return f"frames http {frames_status}"
        pongs = 0
        try:
            async with asyncio.timeout(10):
                while pongs < target.pings:
                    line = await reader.readline()
                    if not line:
                        return f"stream ended after {pongs} pongs"
                    pongs += line.count(b'"type":"pong"')
                    if line.startswith(b"event: close"):
                        return f"closed after {pongs} pongs"
        except TimeoutError:
            return f"{pongs} pongs after 10 s"
        return "all pongs"
    finally:
        for w in writers:
            w.close()


def _token_with(target: Target, claims: dict[str, object], secret: str | None = None) -> str:
    return jwt.encode(claims, secret or target.secret, algorithm="HS256")


async def bad_token(target: Target) -> str:
    return await _hello_then(target, random.choice(["not-a-jwt", "a.b.c", ""]) or None, lambda ws: _until_closed(ws, 5))


async def forged_token(target: Target) -> str:
    now = int(time.time())
    token = _token_with(target, {"sub": "x", "streams": ["*"], "iat": now, "exp": now + 600}, "f" * 32 + "forged")
    return await _hello_then(target, token, lambda ws: _until_closed(ws, 5))


async def expired_token(target: Target) -> str:
    token = issue_token(target.secret, [target.stream], 60, subject="churn", now=int(time.time()) - 3_600)
    return await _hello_then(target, token, lambda ws: _until_closed(ws, 5))


async def string_exp_token(target: Target) -> str:
    token = _token_with(target, {"sub": "x", "streams": [target.stream], "exp": str(int(time.time()) + 600)})
    return await _hello_then(target, token, lambda ws: _until_closed(ws, 5))


async def wrong_stream_token(target: Target) -> str:
    token = issue_token(target.secret, ["some-other-stream"], 600, subject="churn", now=int(time.time()))
    return await _hello_then(target, token, lambda ws: _until_closed(ws, 5))


async def hello_then_leave(target: Target) -> str:
    async def then(ws: ClientConnection) -> str:
        return "welcome, left"

    return await _hello_then(target, target.token(), then)


async def _raw(target: Target, first: bytes, drip: bytes | None) -> str:
    """A TCP connection that sends ``first`` then ``drip`` every 0.5 s (or nothing more), until the server
    closes it or the header timeout + 5 s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
    started = time.monotonic()
    limit = target.header_timeout_s + 5
    try:
        if first:
            writer.write(first)
        while time.monotonic() - started < limit:
            try:
                data = await asyncio.wait_for(reader.read(4096), 0.5)
            except TimeoutError:
                if drip is not None:
                    writer.write(drip)
                    await writer.drain()
                continue
            if not data:
                return "closed by server"
            return "answered: " + data.split(b"\r\n", 1)[0].decode("latin-1")
        return f"still open after {limit:.0f} s"
    except ConnectionResetError:
        return "closed by server"
    finally:
        writer.close()


async def slowloris_upgrade(target: Target) -> str:
    first = (b"GET /ws?stream=%s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             % target.stream.encode())
    return await _raw(target, first, b"X-a: b\r\n")


async def silent_tcp(target: Target) -> str:
    return await _raw(target, b"", None)


KINDS: dict[str, Attack] = {f.__name__: f for f in (
    no_hello, slow_hello, late_hello, garbage_text, garbage_binary, invalid_utf8, invalid_utf8_after_hello,
    oversized_10k, oversized_100k, ping_flood, sse_ping_flood, bad_token, forged_token, expired_token, string_exp_token,
    wrong_stream_token, hello_then_leave, slowloris_upgrade, silent_tcp)}

# How the docs (docs/protocol.md, docs/security.md) say each kind ends.
EXPECTED: dict[str, tuple[str, ...]] = {
    "no_hello": ("close 4408",), "slow_hello": ("close 4408",),
    "late_hello": ("welcome, left",), "garbage_text": ("close 4400",),
    "garbage_binary": ("close 4400", "close 1003"), "invalid_utf8": ("close 1007",),
    "invalid_utf8_after_hello": ("close 1007",), "oversized_10k": ("close 1009",),
    "oversized_100k": ("close 1009",), "ping_flood": ("all pongs",), "sse_ping_flood": ("all pongs",),
    "bad_token": ("close 4401",), "forged_token": ("close 4401",), "expired_token": ("close 4419",),
    "string_exp_token": ("close 4401",), "wrong_stream_token": ("close 4403",),
    "hello_then_leave": ("welcome, left",), "slowloris_upgrade": ("closed by server",),
    "silent_tcp": ("closed by server",),
}


async def run(args: argparse.Namespace, target: Target) -> dict[str, dict[str, int]]:
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    kinds = list(KINDS.items())
    in_flight: set[asyncio.Task[None]] = set()
    bound = max(target.hello_timeout_s, target.header_timeout_s) + 20  # every attack ends by itself well before
    started = done = skipped = 0
    began = time.monotonic()
    progress = Path(args.progress)
    next_progress = 0.0

    async def one(name: str, attack: Attack) -> None:
        nonlocal done
        try:
            outcomes[name][await asyncio.wait_for(attack(target), bound)] += 1
        except TimeoutError:
            outcomes[name][f"gave up after {bound:.0f} s"] += 1
        except (OSError, asyncio.IncompleteReadError, ValueError) as error:
            outcomes[name][f"error {type(error).__name__}"] += 1
        finally:
            done += 1

    def report(now: float) -> None:
        with progress.open("a") as out:
            out.write(json.dumps({"t": round(now, 1), "started": started, "done": done,
                                  "in_flight": len(in_flight), "skipped": skipped}) + "\n")

    total = int(args.rate * args.seconds)
    for i in range(total):
        delay = began + i / args.rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        now = time.monotonic() - began
        if now >= next_progress:
            report(now)
            next_progress += args.progress_seconds
        if len(in_flight) >= args.max_in_flight:
            skipped += 1
            continue
        name, attack = kinds[i % len(kinds)]
        task = asyncio.create_task(one(name, attack))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        started += 1
    if in_flight:
        await asyncio.wait(set(in_flight), timeout=bound + 5)
    for task in list(in_flight):
        task.cancel()
    report(time.monotonic() - began)
    result = {name: dict(counts) for name, counts in outcomes.items()}
    if skipped:
        result["(skipped: in-flight cap)"] = {"skipped": skipped}
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--rate", type=float, required=True, help="attack connections started per second")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--hello-timeout-s", type=float, required=True)
    parser.add_argument("--header-timeout-s", type=float, required=True)
    parser.add_argument("--max-in-flight", type=int, default=2_000)
    parser.add_argument("--progress", required=True)
    parser.add_argument("--progress-seconds", type=float, default=5.0)
    parser.add_argument("--pings", type=int, default=2_000,
                        help="pings per flood (far past 18, where an SSE flood once closed)")
    args = parser.parse_args(argv)
    target = Target(args.port, args.stream, os.environ["SPARKWIRE_AUTH_SECRET"], args.hello_timeout_s,
                    args.header_timeout_s, args.pings)
    print(json.dumps(asyncio.run(run(args, target))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
