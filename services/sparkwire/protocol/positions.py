"""Positions in a stream: the client's cursor, and a hole in a run of seqs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cursor:
    """The last entry a client applied: ``seq`` within ``epoch``, and that entry's ``digest`` (``digest.py``)
    when the client knows it: a cursor with a digest proves which entry it ends at, one without only where."""

    epoch: str
    seq: int
    digest: str | None = None
    # A filtered subscription's view id (the welcome's ``view``): its ``seq`` is the position the client's
    # view is covered up to, which in another view (another filter or scope) would skip entries.
    view: str | None = None


@dataclass(frozen=True)
class Gap:
    """Seq ``expected`` was due but ``got`` (> expected) came first."""

    expected: int
    got: int
