"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nobody listens on right now (the OS picks it; there is a small race until it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
