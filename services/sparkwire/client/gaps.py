"""The client's gap detection by seq: apply ``last + 1``, drop repeats, and never skip a missing seq
(docs/protocol.md, "Client obligations")."""

from __future__ import annotations

from typing import Literal

SeqVerdict = Literal["next", "duplicate", "gap"]


class SeqGapDetector:
    """The client's view of seqs: ``last_seq`` is the last seq applied with none missing before it."""

    def __init__(self, after_seq: int = 0) -> None:
        self.last_seq = after_seq
        self.duplicates = 0
        self.gaps = 0

    def observe(self, seq: int) -> SeqVerdict:
        """``"next"`` (apply it; ``last_seq`` moves), ``"duplicate"`` (drop it) or ``"gap"`` (seqs are
        missing: drop it and reconnect with the cursor ``last_seq``, which stays put)."""
        if seq == self.last_seq + 1:
            self.last_seq = seq
            return "next"
        if seq <= self.last_seq:
            self.duplicates += 1
            return "duplicate"
        self.gaps += 1
        return "gap"

    def reset(self, seq: int) -> None:
        """Start over after a snapshot consistent with ``seq``; the counts are kept (they go in acks)."""
        self.last_seq = seq
