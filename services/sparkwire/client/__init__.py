"""The Python client of the gateway protocol (docs/protocol.md): one stream, applied exactly once.

``session`` holds the frame handling (pure, unit-tested with the gateway's encoders), ``reconnect`` the
resume decisions and backoff, ``connection`` the asyncio loop around them (``StreamClient``),
``background`` a thread for synchronous programs (``BackgroundClient``).
"""

from __future__ import annotations

from sparkwire.protocol.server_frames import ReceivedEntry

from .background import BackgroundClient
from .connection import ClientStats, StreamClient
from .reconnect import ReconnectPolicy, TerminalClose
from .session import ClientSession

__all__ = [
    "BackgroundClient",
    "ClientSession", "ClientStats", "ReceivedEntry", "ReconnectPolicy", "StreamClient",
    "TerminalClose",
]
