"""``sparkwire gateway``: one stateless WebSocket pod serving replay logs, run by uvicorn.

SIGTERM drains: readiness turns false, every client is closed with the resumable going-away code (they
resume on another pod), and the process exits once they are gone or ``--drain-ms`` have passed.
A second SIGTERM exits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import math
import sys
from types import FrameType

import uvicorn

from sparkwire import logs
from sparkwire.build_info import publish as publish_build_info
from sparkwire.gateway.app import create_app
from sparkwire.gateway.pod import Gateway
from sparkwire.gateway.settings import add_arguments, auth_problem, connection_settings, resolve_auth, split_list
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.gateway.transport.front_door import FrontDoor
from sparkwire.gateway.transport.uvicorn_websocket import CONNECTION_LOG, SparkwireWebSocketProtocol
from sparkwire.protocol.limits import MAX_CLIENT_MESSAGE_BYTES
from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.redis_backend import RedisBackend

log = logging.getLogger(__name__)

__all__ = ["add_arguments", "run"]


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, gateway: Gateway, drain_seconds: float) -> None:
        super().__init__(config)
        self.gateway = gateway
        self.drain_seconds = drain_seconds
        self.drain_started = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain_started or self.should_exit:
            super().handle_exit(sig, frame)
            return
        self.drain_started = True
        log.info("draining", extra={"fields": {"signal": sig, "connections": self.gateway.open_connections}})
        asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        self.gateway.drain()  # readyz -> 503; connections close with 1001 going_away
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.drain_seconds
        while self.gateway.open_connections > 0 and loop.time() < deadline:
            await asyncio.sleep(0.05)
        self.should_exit = True


# The collector's default (a young collection every 700 allocations, a full one every 100 young ones) ran
# full collections over every connection's objects often enough to add 0.4 s to the p99 delivery latency at
# 5,000 clients and ~15 % to the CPU (docs/benchmarks.md). Cyclic garbage of closed connections is still
# collected, a little later.
GC_THRESHOLDS = (50_000, 50, 100)


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    gc.set_threshold(*GC_THRESHOLDS)
    resolve_auth(args)
    publish_build_info("gateway")
    problem = auth_problem(args)
    if problem is not None:
        print(f"sparkwire gateway: error: {problem}", file=sys.stderr)
        return 2
    if args.insecure_no_auth:
        log.warning("AUTHENTICATION IS OFF (--insecure-no-auth): every client that reaches this pod reads "
                    "every stream it serves, without a token")
    streams = split_list(args.streams)
    for stream in streams:
        StreamKeys(stream)  # fail at start on a bad name, not on the first client
    backend = RedisBackend.for_gateway(args.redis_url, pool_size=args.redis_pool_size, streams=len(streams),
                                       timeout_s=args.redis_timeout_ms / 1000)
    gateway = Gateway(
        backend=backend, streams=streams, connection=connection_settings(args),
        sessions=SessionStore(backend.sessions, ttl_seconds=math.ceil(args.session_ttl_ms / 1000), pod=args.pod_name),
        allowed_origins=frozenset(split_list(args.allowed_origins)),
        allow_missing_origin=args.allow_missing_origin, ring_size=args.ring_size,
        send_queue=args.send_queue,
    )
    config = uvicorn.Config(
        create_app(gateway), host=args.host, port=args.port, log_level=args.log_level.lower(),
        # transport.uvicorn_websocket: lighter per connection, live batches written through.
        ws=SparkwireWebSocketProtocol,
        # transport.front_door: a plain upgrade opened from one read of its head, anything else handed to
        # transport.uvicorn_http; both with a deadline for request headers (slowloris) and the connection cap.
        http=FrontDoor.configured(header_timeout_s=args.header_timeout_ms / 1000,
                                  max_connections=args.max_connections or None),
        ws_max_size=max(args.max_frame_bytes, MAX_CLIENT_MESSAGE_BYTES),
        ws_per_message_deflate=args.per_message_deflate,
        # No WebSocket-level pings: the gateway's own pings (which browsers can answer) detect dead clients.
        ws_ping_interval=None, ws_ping_timeout=None, access_log=False,
        # Nothing here reads the client's address or scheme, and the proxy-headers middleware would be one
        # more coroutine frame every open connection keeps (no access log: nothing to rewrite).
        proxy_headers=False,
        timeout_graceful_shutdown=max(math.ceil(args.drain_ms / 1000), 1), lifespan="on",
    )
    CONNECTION_LOG.setLevel(logging.DEBUG if args.log_level.upper() == "DEBUG" else logging.WARNING)
    DrainingServer(config, gateway, args.drain_ms / 1000).run()
    return 0
