"""The replay/live junction: ``ReplayMerger`` and ``junction_step`` turn history pages read from the log plus
the live entries buffered since subscribing into one run of entries, each seq once, in order, never skipping
a missing one — pure, no I/O (docs/protocol.md). (The client's side, dedup and gap detection, lives with the
client: ``sparkwire.client.dedup`` and ``gaps``.)"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sparkwire.protocol.positions import Gap
from sparkwire.replaylog.model import Entry


class GapError(Exception):
    def __init__(self, gap: Gap) -> None:
        super().__init__(f"gap in the log: expected seq {gap.expected}, got {gap.got}")
        self.gap = gap


class ReplayMerger:
    """Hands out each seq after ``after_seq`` exactly once, in order, from batches that may overlap,
    repeat entries and be unordered within a batch."""

    __slots__ = ("delivered",)

    def __init__(self, after_seq: int) -> None:
        self.delivered = after_seq

    def take(self, entries: Iterable[Entry]) -> tuple[list[Entry], Gap | None]:
        """The entries of this batch not yet delivered, in seq order, up to the first missing seq, and
        that ``Gap`` if there is one. Seqs at or below ``delivered`` are dropped, so offering a batch
        again after filling its hole from history is safe."""
        by_seq: dict[int, Entry] = {}
        for entry in entries:
            if entry.seq > self.delivered:
                by_seq.setdefault(entry.seq, entry)
        accepted: list[Entry] = []
        gap = None
        for seq in sorted(by_seq):
            if seq != self.delivered + 1:
                gap = Gap(expected=self.delivered + 1, got=seq)
                break
            accepted.append(by_seq[seq])
            self.delivered = seq
        return accepted, gap

    def take_run(self, first_seq: int, last_seq: int) -> bool:
        """Take the whole run of consecutive seqs ``first_seq..last_seq`` if it starts right after what
        was delivered (True), else take nothing (False): the check of ``take`` for a batch known to be
        consecutive, without looking at its entries."""
        if first_seq != self.delivered + 1 or last_seq < first_seq:
            return False
        self.delivered = last_seq
        return True

    def offer(self, entries: Iterable[Entry]) -> list[Entry]:
        """Like ``take``, but all or nothing: raises ``GapError`` on a gap, and then takes nothing."""
        before = self.delivered
        accepted, gap = self.take(entries)
        if gap is not None:
            self.delivered = before
            raise GapError(gap)
        return accepted

    def reaches(self, live_buffer: Sequence[Entry]) -> bool:
        """Whether the live buffer starts at or before the next seq due: history is no longer needed."""
        return bool(live_buffer) and min(entry.seq for entry in live_buffer) <= self.delivered + 1


@dataclass(frozen=True)
class JunctionStep:
    """What one history page did: ``entries`` to send now, then ``next``:

    * ``"history"``: read the next page after ``merger.delivered``;
    * ``"live"``: the live buffer was merged in; from now on offer each live batch as it comes;
    * ``"gap"``: the log lacks ``gap.expected`` (trimmed, or the stream reset under us): send
      ``entries`` (all in order before the hole), then restart from a snapshot or close resumably.
    """

    entries: list[Entry]
    next: Literal["history", "live", "gap"]
    gap: Gap | None = None


def junction_step(
    merger: ReplayMerger, page: Sequence[Entry], live_buffer: Sequence[Entry], page_size: int
) -> JunctionStep:
    """Merge one history ``page`` (``read_after(merger.delivered, page_size)``) with the live entries
    buffered since subscribing, which the server subscribed to *before* reading any history.

    A short page means history held nothing more when read; since the subscription is older than the
    read, every later entry is in the live buffer (or on its way), so the buffer must join without a hole.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    sent, gap = merger.take(page)
    if gap is not None:
        return JunctionStep(entries=sent, next="gap", gap=gap)
    exhausted = len(page) < page_size
    if not (exhausted or merger.reaches(live_buffer)):
        return JunctionStep(entries=sent, next="history")
    from_live, gap = merger.take(live_buffer)
    sent += from_live
    if gap is None:
        return JunctionStep(entries=sent, next="live")
    # The live feed lost an entry history may still have: read on; only a hole in both is a gap.
    if exhausted:
        return JunctionStep(entries=sent, next="gap", gap=gap)
    return JunctionStep(entries=sent, next="history")
