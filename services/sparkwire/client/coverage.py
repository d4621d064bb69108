"""The client's gap detection for a filtered subscription: by coverage, not by consecutive seqs
(docs/protocol.md, "Filtered subscriptions").

Each filtered ``entries`` frame says it lists every entry of the log in ``(after, through]`` that the view
delivers. The client keeps ``covered``, the position up to which it holds its view's every entry; a frame
with ``after <= covered < through`` extends it to ``through`` (its items at or below ``covered`` are
repeats), one with ``through <= covered`` is a repeat, and one with ``after > covered`` leaves
``(covered, after]`` unaccounted for: a gap, however many of those entries the filter would have dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sparkwire.protocol.items import StateItem
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame

CoverageVerdict = Literal["next", "duplicate", "gap"]


@dataclass(frozen=True)
class Covered:
    """What one frame did: ``verdict``, and the items to apply (``next`` only), in seq order."""

    verdict: CoverageVerdict
    fresh: tuple[ReceivedEntry | Removal, ...] = ()


class ViewCoverage:
    """``covered``: the client holds every entry of its view up to this seq (and ``digest``, that of the
    log's entry there, for its cursor and acks). Counts go in acks, as ``SeqGapDetector``'s."""

    def __init__(self, covered: int = 0, digest: str | None = None) -> None:
        self.covered = covered
        self.digest = digest
        self.duplicates = 0
        self.gaps = 0

    def observe(self, frame: ViewEntriesFrame) -> Covered:
        """``next``: apply ``fresh``; ``covered`` moves to ``frame.through``. ``duplicate``: drop the
        frame. ``gap``: drop it and reconnect with the cursor at ``covered``, which stays put."""
        if frame.through <= self.covered:
            self.duplicates += len(frame.items)
            return Covered("duplicate")
        if frame.after > self.covered:
            self.gaps += 1
            return Covered("gap")
        fresh = tuple(item for item in frame.items if item.seq > self.covered)
        self.duplicates += len(frame.items) - len(fresh)
        self.covered, self.digest = frame.through, frame.digest
        return Covered("next", fresh)

    def reset(self, seq: int, digest: str | None) -> None:
        """Start over after a (filtered) snapshot consistent with ``seq``; the counts are kept."""
        self.covered, self.digest = seq, digest


def apply_items(
    state: dict[str, StateItem], items: tuple[ReceivedEntry | Removal, ...]
) -> list[ReceivedEntry | Removal]:
    """Apply fresh items to the state (latest per key): an entry replaces its key's item, a removal drops
    the key. Returns what changed the state: a removal of a key not held is a no-op, not returned, so a
    page drops a card once however many removals of its key a replay repeats."""
    changed: list[ReceivedEntry | Removal] = []
    for item in items:
        if isinstance(item, Removal):
            if state.pop(item.key, None) is not None:
                changed.append(item)
        else:
            state[item.key] = StateItem(seq=item.seq, processing_id=item.processing_id, data=item.data)
            changed.append(item)
    return changed
