"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import socket
import threading

# Ports this process handed out. The OS may give a port back as soon as the probe socket closes, before the
# process it was picked for binds it: a primary and a sentinel built one after the other then got the same
# port, and one of them failed to start (seen once in CI). Never handing a port out twice closes that race
# within a process; between processes the race stays (small: the OS cycles through its ephemeral range).
_handed_out: set[int] = set()
_lock = threading.Lock()


def free_port() -> int:
    """A port nobody listens on right now and this process has not handed out before."""
    with _lock:
        for _ in range(1000):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port: int = sock.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError("no free port that was not handed out already")
