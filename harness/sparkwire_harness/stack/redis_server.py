"""A throwaway local ``redis-server`` with durable writes (AOF, fsync on every write)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import redis

from .paths import SetupMissingError
from .ports import free_port
from .process import ManagedProcess


def redis_server_executable() -> str:
    found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")
    if found is None:
        raise SetupMissingError("redis-server not found: run `make setup` (it apt-installs redis-server)")
    return found


class RedisProcess:
    """One ``redis-server`` process on 127.0.0.1:``port`` with its files in ``workdir``: started and waited on
    until it answers PING, stopped, killed, restarted, its log. What it runs is the subclass's ``_command()``,
    read at every start; what it needs on disk first, its ``_prepare()``."""

    def __init__(self, workdir: Path, port: int | None, name: str) -> None:
        self.workdir = Path(workdir)
        self.port = port if port is not None else free_port()
        self.process = ManagedProcess(name, self._command(), self.workdir)

    def _command(self) -> list[str]:
        """The command line, read at every start."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """Before every start (nothing by default)."""

    def ping(self) -> bool:
        with redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1.0, socket_connect_timeout=1.0) as client:
            return bool(client.ping())

    def start(self, timeout: float = 30.0) -> None:
        self._prepare()
        self.process.command = self._command()
        self.process.start()
        self.process.wait_ready(self.ping, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self.process.stop(timeout)

    def kill(self) -> None:
        self.process.kill()

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    def log_tail(self, lines: int = 50) -> str:
        return self.process.log_tail(lines)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class RedisServer(RedisProcess):
    """``redis-server`` on 127.0.0.1 with its data (AOF) in ``workdir``; ``restart()`` keeps the data.

    ``extra_args``: more settings, e.g. ``["--replicaof", "127.0.0.1", "6379"]``; read at every start, so
    changing ``extra_args`` between a stop and a start changes what the server starts with."""

    def __init__(self, workdir: Path, port: int | None = None, *, extra_args: Sequence[str] = ()) -> None:
        self.extra_args = list(extra_args)
        super().__init__(workdir, port, "redis")

    def _command(self) -> list[str]:
        return [
            redis_server_executable(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.workdir),
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
            "--daemonize", "no",
            "--logfile", "",
            *self.extra_args,
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, *, decode_responses: bool = False) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=decode_responses)
