"""websockets' server side of a connection that starts open (an upgrade ``transport.upgrade`` checked), made
by copying a template's settings instead of running ``ServerProtocol.__init__`` per connection.

That constructor was about 5 % of a handshake's CPU when thousands of clients connect at once (py-spy of
``bench/handshake_cpu.py``): a uuid4 with its ``getrandom`` system call, a logger check, the size limits
unpacked, about thirty attributes set one by one. All but five of them are the same for every connection
of a pod; those five (the stream reader, the event and write lists, the negotiated extensions, the frame
parser) are made afresh for each, and the connection's ``id`` (websockets keeps it for logs) is drawn the
first time something reads it. A unit test holds the copy to what the constructor makes, attribute by
attribute, so a websockets upgrade that adds one fails there rather than here.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

# Made afresh per connection: everything else a ``ServerProtocol`` holds is a setting or an immutable value.
PER_CONNECTION = frozenset({"reader", "events", "writes", "extensions", "parser", "_id"})


def deflate_factories() -> list[ServerPerMessageDeflateFactory]:
    """permessage-deflate as ``sparkwire gateway --per-message-deflate`` offers it: 4 KiB windows and a smaller
    memory level, for ~40 KB per idle connection (docs/benchmarks.md) rather than websockets' defaults."""
    return [ServerPerMessageDeflateFactory(server_max_window_bits=12, client_max_window_bits=12,
                                           compress_settings={"memLevel": 5})]


# A template per (max_size, logger, deflate): the attributes every connection's side shares.
_TEMPLATES: dict[tuple[int | None, int, bool], dict[str, Any]] = {}


class LeanServerProtocol(ServerProtocol):
    """A ``ServerProtocol`` in the OPEN state; ``LeanServerProtocol.open(...)`` makes one per connection."""

    @property
    def id(self) -> uuid.UUID:
        """Unique identifier of the connection, for logs (drawn when first read)."""
        try:
            return self._id
        except AttributeError:
            self._id: uuid.UUID = uuid.uuid4()
            return self._id

    @id.setter
    def id(self, value: uuid.UUID) -> None:
        self._id = value

    @classmethod
    def open(cls, *, deflate: bool, max_size: int | None, logger: logging.Logger) -> LeanServerProtocol:
        """What ``ServerProtocol(extensions=deflate_factories() if deflate else [], max_size=..., logger=...,
        state=State.OPEN)`` makes."""
        key = (max_size, id(logger), deflate)
        template = _TEMPLATES.get(key)
        if template is None:
            made = cls(extensions=deflate_factories() if deflate else [], max_size=max_size, logger=logger,
                       state=State.OPEN)
            template = {name: value for name, value in vars(made).items() if name not in PER_CONNECTION}
            _TEMPLATES[key] = template
        conn = cls.__new__(cls)
        vars(conn).update(template)
        conn.reader = StreamReader()
        conn.events = []
        conn.writes = []
        conn.extensions = []
        conn.parser = conn.parse()
        next(conn.parser)
        return conn


__all__ = ["PER_CONNECTION", "LeanServerProtocol", "deflate_factories"]
