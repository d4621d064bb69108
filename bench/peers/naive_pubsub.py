"""The naive floor: a Starlette WebSocket endpoint that broadcasts every message of one Redis pub/sub
channel to every connected client, with no guarantee at all (no log, no resume, no acks, no order
across reconnects: whatever is published while a client is away is gone). It is what exactly-once
delivery is measured against: the gap between it and the gateway is the price of the guarantee.

Same stack as the gateway (uvicorn, uvloop, Starlette, redis-py asyncio), same uvicorn options (no
compression, no WebSocket-level pings, no access log), so the difference is the delivery logic.

    .venv/bin/python bench/peers/naive_pubsub.py --port 8001 --redis-url redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as redis
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

CHANNEL = "bench"
WELCOME = '{"type":"welcome"}'


def create_app(redis_url: str) -> Starlette:
    clients: set[WebSocket] = set()

    async def broadcast() -> None:
        client = redis.Redis.from_url(redis_url)
        async with client.pubsub() as pubsub:
            await pubsub.subscribe(CHANNEL)
            async for message in pubsub.listen():
                if message["type"] != "message":
                    continue
                text = message["data"].decode()
                for ws in list(clients):  # one send per client, in turn: the simplest fan-out
                    try:
                        await ws.send_text(text)
                    except Exception:  # a client gone mid-send: drop it, nobody resends
                        clients.discard(ws)

    async def endpoint(ws: WebSocket) -> None:
        await ws.accept()
        await ws.send_text(WELCOME)
        clients.add(ws)
        try:
            while True:
                await ws.receive_text()  # clients send nothing; this notices them leaving
        except WebSocketDisconnect:
            pass
        finally:
            clients.discard(ws)

    async def ready(_: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(broadcast())
        yield
        task.cancel()

    return Starlette(routes=[WebSocketRoute("/ws", endpoint), Route("/readyz", ready)], lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    uvicorn.run(create_app(args.redis_url), host="127.0.0.1", port=args.port, log_level="warning",
                ws_per_message_deflate=False, ws_ping_interval=None, ws_ping_timeout=None, access_log=False,
                lifespan="on")


if __name__ == "__main__":
    main()
