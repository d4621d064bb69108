"""A fresh chart install refuses an unauthenticated client — shown without a cluster: the gateway command
and environment of the rendered Deployment (the Secret the chart generated resolved as the kubelet would),
run as a real process against a real Redis. Only what a pod gets from elsewhere is replaced: the Redis
address and the port. Tokens are minted the way NOTES.txt says, with ``sparkwire token``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from sparkwire_harness.stack import ManagedProcess, RedisServer, http_status
from sparkwire_harness.stack.ports import free_port

from ...chart.conftest import gateway_container, render, resolved_env

STREAM = "metrics"  # the chart's default stream


class ChartGateway:
    def __init__(self, workdir: Path, redis_url: str, sets: dict[str, Any]) -> None:
        objects = render(sets=sets)
        container = gateway_container(objects)
        self.env = resolved_env(objects)
        assert self.env["SPARKWIRE_REDIS_URL"].startswith("redis://:$(REDIS_PASSWORD)@"), "the chart's Redis"
        self.port = free_port()
        self.env |= {"SPARKWIRE_REDIS_URL": redis_url, "SPARKWIRE_PORT": str(self.port)}
        program, *args = container["command"]  # ["sparkwire", "gateway"]: the console script of this venv
        command = [str(Path(sys.executable).parent / program), *args]
        # SPARKWIRE_* of this test run must not leak into the pod's environment.
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SPARKWIRE_")}
        self.process = ManagedProcess(f"chart-gateway-{self.port}", command, workdir, env={**clean, **self.env})

    def start(self) -> ChartGateway:
        self.process.start()
        self.process.wait_ready(lambda: http_status(f"http://127.0.0.1:{self.port}/readyz") == 200, timeout=30)
        return self

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws?stream={STREAM}"

    def token(self) -> str:
        """What NOTES.txt tells the user to run, with the secret read from the chart's Secret."""
        done = subprocess.run([str(Path(sys.executable).parent / "sparkwire"), "token", "--streams", STREAM,
                               "--ttl-ms", "600000"], capture_output=True, text=True, timeout=30, check=True,
                              env={**os.environ, "SPARKWIRE_AUTH_SECRET": self.env["SPARKWIRE_AUTH_SECRET"]})
        return done.stdout.strip()


@contextlib.contextmanager
def chart_gateway(tmp_path: Path, redis_server: RedisServer, sets: dict[str, Any]) -> Iterator[ChartGateway]:
    gateway = ChartGateway(tmp_path, redis_server.url, sets).start()
    try:
        yield gateway
    finally:
        gateway.process.stop()


async def outcome(url: str, token: str | None, origin: str | None = None) -> tuple[int | None, list[dict[str, Any]]]:
    """Hello with ``token``: the close code (None: welcomed) and the frames received."""
    frames: list[dict[str, Any]] = []
    async with connect(url, origin=Origin(origin) if origin else None, open_timeout=5) as ws:
        hello = {"type": "hello", "v": 1, **({"token": token} if token else {})}
        with contextlib.suppress(ConnectionClosed):
            await ws.send(json.dumps(hello))
        try:
            async with asyncio.timeout(5):
                while True:
                    frames.append(json.loads(await ws.recv()))
                    if frames[-1]["type"] == "welcome":
                        return None, frames
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else None), frames
    raise AssertionError("unreachable")


def test_a_fresh_install_refuses_a_client_without_a_token(tmp_path: Path, redis_server: RedisServer) -> None:
    with chart_gateway(tmp_path, redis_server, {}) as gateway:
        assert gateway.env["SPARKWIRE_INSECURE_NO_AUTH"] == "false"
        assert len(gateway.env["SPARKWIRE_AUTH_SECRET"]) == 48, "the secret the chart generated"
        code, frames = asyncio.run(outcome(gateway.ws, None))
        assert code == 4401 and frames[-1]["type"] == "error" and frames[-1]["reason"] == "token required", frames
        code, frames = asyncio.run(outcome(gateway.ws, "eyJhbGciOiJIUzI1NiJ9.e30.forged"))
        assert code == 4401, frames
        code, frames = asyncio.run(outcome(gateway.ws, gateway.token()))
        assert code is None, f"a token minted as the NOTES say is accepted: {frames}"
        assert "AUTHENTICATION IS OFF" not in gateway.process.log_tail(200)


def test_with_ingress_hosts_a_client_without_origin_is_refused(tmp_path: Path, redis_server: RedisServer) -> None:
    sets = {"gateway.ingress.enabled": True, "gateway.ingress.hosts": ["ws.example.com"],
            "gateway.ingress.tls": [{"secretName": "tls", "hosts": ["ws.example.com"]}]}
    with chart_gateway(tmp_path, redis_server, sets) as gateway:
        token = gateway.token()
        code, frames = asyncio.run(outcome(gateway.ws, token))
        assert code == 1008 and frames[-1]["code"] == 1008, frames
        assert asyncio.run(outcome(gateway.ws, token, "https://evil.example"))[0] == 1008
        code, frames = asyncio.run(outcome(gateway.ws, token, "https://ws.example.com"))
        assert code is None, frames


def test_the_opt_out_serves_without_a_token_and_says_so(tmp_path: Path, redis_server: RedisServer) -> None:
    sets = {"gateway.auth.enabled": False}
    with chart_gateway(tmp_path, redis_server, sets) as gateway:
        assert "SPARKWIRE_AUTH_SECRET" not in gateway.env
        assert asyncio.run(outcome(gateway.ws, None))[0] is None
        assert "AUTHENTICATION IS OFF" in gateway.process.log_tail(200)
