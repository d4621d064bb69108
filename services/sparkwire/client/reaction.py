"""What the connection must do after the session handled a frame (``session.py`` and ``view.py`` return it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkwire.protocol.positions import Gap
from sparkwire.protocol.server_frames import ReceivedEntry


@dataclass(frozen=True)
class Reaction:
    """What the connection must do after a frame: ``send`` these frames, then, if ``gap`` is set, close
    and resume from the cursor (entries after a hole must not be applied); if ``protocol_error`` is set,
    close: the server spoke something else than this protocol."""

    send: list[str] = field(default_factory=list)
    gap: Gap | None = None
    protocol_error: str | None = None
    applied: tuple[ReceivedEntry, ...] = ()
    """The entries this frame applied (each once, in seq order), already handed to ``on_entry``."""
