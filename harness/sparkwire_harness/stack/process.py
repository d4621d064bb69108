"""A local child process with its output in a log file: start, wait until ready, stop, kill."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

_running: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()


class ProcessDiedError(RuntimeError):
    """The process exited while we waited for it to become ready."""


class ReadyTimeoutError(TimeoutError):
    """The process stayed up but did not become ready in time."""


class ManagedProcess:
    """One command run in its own session (process group), stdout+stderr appended to ``<name>.log``."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.workdir = Path(workdir)
        self.env = dict(env) if env is not None else None
        self.log_path = self.workdir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None

    # -- state ---------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def log_tail(self, lines: int = 50) -> str:
        """The last ``lines`` lines of the log (empty if there is none yet)."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 256 * lines))
                data = log.read()
        except FileNotFoundError:
            return ""
        return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self.alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} start: {' '.join(self.command)}\n".encode())
            log.flush()
            env = {**os.environ, **self.env} if self.env is not None else None
            self._proc = subprocess.Popen(
                self.command,
                cwd=self.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _running.add(self)

    def wait_ready(self, check: Callable[[], bool], timeout: float = 30.0, interval: float = 0.1) -> None:
        """Poll ``check`` until it returns True; fail fast if the process dies meanwhile.

        Exceptions raised by ``check`` count as "not ready yet".
        """
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive:
                raise ProcessDiedError(
                    f"{self.name} exited with code {self.returncode} before becoming ready; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                if check():
                    return
            except Exception:
                pass
            if time.monotonic() >= deadline:
                raise ReadyTimeoutError(
                    f"{self.name} (pid {self.pid}) not ready after {timeout:.0f}s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(interval)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL of the whole process group if it has not exited within ``timeout``."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        self.kill()

    def kill(self) -> None:
        """SIGKILL of the process and everything in its process group (a crash, as far as it can tell)."""
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _running.discard(self)

    def restart(self, timeout: float = 10.0) -> None:
        self.stop(timeout)
        self.start()

    # -- context manager -----------------------------------------------------------------------------

    def __enter__(self) -> ManagedProcess:
        if not self.alive:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid}, alive={self.alive})"


def exit_on_sigterm() -> None:
    """Make SIGTERM unwind like an exit (``SystemExit(143)``), so that every ``finally``, context manager and
    the atexit hook below stop the processes this one started. Without it a SIGTERM (``timeout``, a supervisor,
    ``kill``) ends the interpreter at once and leaves its whole stack running. Call from the main thread."""
    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


@atexit.register
def _kill_leftovers() -> None:
    """Never leave servers behind when the interpreter exits without stopping them."""
    for process in list(_running):
        process.kill()
