"""`kubectl port-forward` to a pod's or Service's port on a free local port; restartable (the pod may be
replaced): the way the suite reaches the release's Redis and the driver's metrics from this machine."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from .tools import kubectl_command

FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")

Popen = Callable[..., "subprocess.Popen[str]"]


def forwarded_port(line: str) -> int | None:
    """The local port of kubectl's `Forwarding from 127.0.0.1:<port> -> <remote>` line, or None."""
    match = FORWARDING.search(line)
    return int(match.group(1)) if match else None


class PortForward:
    def __init__(self, target: str, remote_port: int, popen: Popen = subprocess.Popen) -> None:
        self.target = target  # pod/<name> or svc/<name>
        self.remote_port = remote_port
        self.local_port = 0
        self._popen = popen
        self._process: subprocess.Popen[str] | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        return kubectl_command("port-forward", "--address", "127.0.0.1", self.target, f":{self.remote_port}")

    def start(self, timeout: float = 30) -> int:
        """(Re)started; the local port, once kubectl says it forwards, or an AssertionError with what it said."""
        self.stop()
        process = self._popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._process = process
        lines: queue.Queue[str] = queue.Queue()

        def read(stdout: Any) -> None:
            for text in stdout or []:
                lines.put(text)

        threading.Thread(target=read, args=(process.stdout,), daemon=True).start()
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                text = lines.get(timeout=0.5)
            except queue.Empty:
                if process.poll() is not None and lines.empty():
                    break
                continue
            seen.append(text.strip())
            port = forwarded_port(text)
            if port is not None:
                self.local_port = port
                return port
        self.stop()
        raise AssertionError(f"port-forward to {self.target} did not start: {seen}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None
