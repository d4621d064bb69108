"""The Go load generator (bench/loadgen) as a child process: one JSON command per line on its stdin, one
JSON answer per line on its stdout."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from _servers import LOADGEN_CPU, go_binary, pinned


class GoLoadGen:
    def __init__(self, log: Path) -> None:
        self.log = log.open("ab")
        self.process = subprocess.Popen(pinned([str(go_binary("loadgen"))], LOADGEN_CPU), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)

    def call(self, cmd: str, **params: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"cmd": cmd, **params}) + "\n")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"loadgen exited (code {self.process.poll()}); its log: {self.log.name}")
        result: dict[str, Any] = json.loads(line)
        return result

    @property
    def pid(self) -> int:
        return self.process.pid

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.call("exit")
                self.process.wait(15)
            except (RuntimeError, OSError, subprocess.TimeoutExpired):
                self.process.kill()
        self.log.close()
