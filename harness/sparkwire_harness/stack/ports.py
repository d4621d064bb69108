"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import os
import random
import re
import socket
import threading

# Ports this process handed out. The OS may give a port back as soon as the probe socket closes, before the
# process it was picked for binds it: a primary and a sentinel built one after the other then got the same
# port, and one of them failed to start (seen once in CI). Never handing a port out twice closes that race
# within a process.
_handed_out: set[int] = set()
_lock = threading.Lock()

# Between processes the race stays when they draw from one pool, as the OS's ephemeral range is: `make test`
# runs three pytest processes side by side (tests/run-suite.sh) that start servers at the same time. So each
# draws from a block of its own, below Linux's ephemeral range (32768-60999), where no outgoing connection's
# local port lands either: SPARKWIRE_PORT_BLOCK names it (0-3), else a pytest-xdist worker's number does; a
# process with neither (a single pytest run, the demo, chaos) uses the first block.
_FIRST_PORT = 12_000
_BLOCK = 5_000
_BLOCKS = 4


def _block() -> range:
    named = os.environ.get("SPARKWIRE_PORT_BLOCK", "")
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    index = int(named) % _BLOCKS if named.isdigit() else int(worker.group(1)) % _BLOCKS if worker else 0
    start = _FIRST_PORT + index * _BLOCK
    return range(start, start + _BLOCK)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nobody listens on right now and this process has not handed out before, from this process's
    block."""
    block = _block()
    with _lock:
        offset = random.randrange(len(block))  # a restarted process does not start where the last one did
        for step in range(len(block)):
            port = block[(offset + step) % len(block)]
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    raise RuntimeError(f"no free port in {block.start}-{block.stop - 1} that was not handed out already")
