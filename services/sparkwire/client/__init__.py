"""The Python client of the gateway protocol (docs/protocol.md): one stream, applied exactly once.

``session`` holds the frame handling (pure, unit-tested with the gateway's encoders), ``reconnect`` the
resume decisions and backoff, ``connection`` the asyncio loop around them (``StreamClient``, and ``async for
entry in client`` through a bounded queue), ``background`` a thread for synchronous programs
(``BackgroundClient``). Memory does not grow with the stream: the last entries are in ``recent`` (bounded);
``keep_applied=True`` keeps them all in ``applied``, for tests and oracles. ``filter=`` subscribes to the
matching entries only (``view`` applies those frames by coverage; ``Removal``: a key that stopped matching).
"""

from __future__ import annotations

from sparkwire.protocol.filter_form import FilterError
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire.protocol.view_frames import Removal

from .background import BackgroundClient
from .connection import ClientStats, StreamClient
from .reconnect import ReconnectPolicy, TerminalClose
from .session import ClientSession

__all__ = [
    "BackgroundClient",
    "ClientSession", "ClientStats", "FilterError", "ReceivedEntry", "ReconnectPolicy", "Removal", "StreamClient",
    "TerminalClose",
]
