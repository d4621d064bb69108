"""ManagedProcess's owner SIGTERMed: ``exit_on_sigterm`` makes it stop what it started (``make demo`` and
``sparkwire-harness chaos`` under ``timeout`` or ``kill`` once left their whole stack running)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# A harness process in miniature: starts a child in its own session, waits, stops it in ``finally``.
OWNER = """
import sys, time
from pathlib import Path
from sparkwire_harness.stack import ManagedProcess, exit_on_sigterm
if sys.argv[2] == "handled":
    exit_on_sigterm()
child = ManagedProcess("sleeper", ["sleep", "300"], Path(sys.argv[1]))
child.start()
try:
    print(child.pid, flush=True)
    time.sleep(300)
finally:
    child.stop()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _terminate_owner(tmp_path: Path, mode: str) -> tuple[int, int]:
    """SIGTERM the owner; (its exit status, its child's pid)."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path), mode], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    child = int(owner.stdout.readline())
    assert _alive(child)
    owner.send_signal(signal.SIGTERM)
    return owner.wait(timeout=30), child


def test_a_sigtermed_owner_stops_its_processes(tmp_path: Path) -> None:
    status, child = _terminate_owner(tmp_path, "handled")
    assert status == 128 + signal.SIGTERM
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the child outlived its owner"


def test_without_it_the_child_outlives_its_owner(tmp_path: Path) -> None:
    """Why the handler is needed: the default SIGTERM action skips every finally and atexit hook."""
    status, child = _terminate_owner(tmp_path, "default")
    try:
        assert status == -signal.SIGTERM
        time.sleep(0.5)
        assert _alive(child)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGKILL)  # its own session: the group is the child's pid
