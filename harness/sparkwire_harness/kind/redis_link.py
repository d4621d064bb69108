"""The release's Redis from this machine: a port-forward to its pod, re-opened after the pod is replaced,
and every call retried through connection errors until its timeout (a Redis pod deleted under load is back
within seconds)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis as redis_lib

from sparkwire.replaylog import ReplayLogReader
from sparkwire.replaylog.model import Entry, StreamMeta

from .kube import Kube
from .port_forward import PortForward
from .settings import REDIS_POD

RETRIED = (redis_lib.ConnectionError, redis_lib.TimeoutError, AssertionError)  # AssertionError: no forward


class RedisLink:
    def __init__(self, kube: Kube, forward: PortForward | None = None,
                 connect: Callable[..., redis_lib.Redis] = redis_lib.Redis) -> None:
        self.password = kube.redis_password()
        self.forward = forward or PortForward(f"pod/{REDIS_POD}", 6379)
        self._connect = connect

    def call(self, action: Callable[[redis_lib.Redis], Any], timeout: float = 120) -> Any:
        """``action`` on a client of the forwarded port; on a connection error the forward is dropped and
        opened again, until ``timeout``, after which the last error is raised."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self.forward.alive:
                    self.forward.start()
                client = self._connect(port=self.forward.local_port, password=self.password, socket_timeout=10)
                try:
                    return action(client)
                finally:
                    client.close()
            except RETRIED:
                self.forward.stop()
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)

    def log(self, stream: str) -> list[Entry]:
        entries: list[Entry] = self.call(lambda r: list(ReplayLogReader(r, stream).iter_all()))
        return entries

    def meta(self, stream: str) -> StreamMeta:
        meta: StreamMeta = self.call(lambda r: ReplayLogReader(r, stream).meta())
        return meta

    def close(self) -> None:
        self.forward.stop()
