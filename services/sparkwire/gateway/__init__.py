"""The WebSocket gateway: serves a stream's replay log to browsers, replay then live, exactly once.

``protocol`` (frames on the wire), ``close_codes`` (why a connection ended and whether to resume) and
``recovery`` (where a connection starts, and the replay/live junction) are pure: no I/O (docs/protocol.md).
"""

from __future__ import annotations
