"""The client's dedup by processingId: a resume from a stale cursor, or a snapshot after entries, can
repeat a result that the seq check alone would not catch (docs/protocol.md, "Client obligations")."""

from __future__ import annotations

from collections import OrderedDict


class ClientDeduper:
    """Remembers the last ``capacity`` processingIds seen; a repeat refreshes its place."""

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.duplicates = 0
        self._seen: OrderedDict[str, None] = OrderedDict()

    def is_duplicate(self, processing_id: str) -> bool:
        """True if ``processing_id`` was seen (and is still remembered); records it either way."""
        if processing_id in self._seen:
            self._seen.move_to_end(processing_id)
            self.duplicates += 1
            return True
        self._seen[processing_id] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return False

    def __len__(self) -> int:
        return len(self._seen)
