"""A real gateway (``sparkwire gateway`` under uvicorn) as a child process on a free port."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from .ports import free_port
from .process import ManagedProcess


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


class GatewayProcess:
    """``auth_secret`` turns authentication on; without it the gateway runs with ``--insecure-no-auth``,
    said explicitly as the gateway requires (tests of everything but auth connect without tokens)."""

    def __init__(self, workdir: Path, redis_url: str, streams: list[str], *extra: str,
                 env: dict[str, str] | None = None, auth_secret: str | None = None) -> None:
        self.port = free_port()
        self.auth_secret = auth_secret
        command = [sys.executable, "-m", "sparkwire.cli", "gateway", "--port", str(self.port),
                   "--redis-url", redis_url, "--streams", ",".join(streams), "--pod-name", f"gw-{self.port}",
                   "--drain-ms", "5000", *extra]
        env = dict(env or {})
        if auth_secret is None:
            command += ["--insecure-no-auth"]
        else:
            # As the chart gives it: in the environment, not on the command line the log records.
            env["SPARKWIRE_AUTH_SECRET"] = auth_secret
        self.process = ManagedProcess(f"gateway-{self.port}", command, workdir, env=env)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws(self, stream: str) -> str:
        return f"ws://127.0.0.1:{self.port}/ws?stream={stream}"

    def start(self) -> GatewayProcess:
        self.process.start()
        self.process.wait_ready(lambda: http_status(f"{self.http}/readyz") == 200, timeout=30)
        return self

    def stop(self) -> None:
        self.process.stop()

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"{self.http}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def metric(self, name: str) -> float:
        """The sum of every sample of ``name`` (all label sets)."""
        return sum(float(line.rpartition(" ")[2]) for line in self.metrics_text().splitlines()
                   if line.startswith(name) and not line.startswith("#"))
