"""What a stream carries, as the protocol sends it: an entry of the log, the latest item per key, a
snapshot of those items. The replay log stores these; the gateway encodes them; the clients apply them.
Defined here, not in the log, so that a client depends on the protocol alone (no Redis, no Spark)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from sparkwire.protocol.digest import entry_digest


@dataclass(frozen=True)
class Entry:
    """One committed result as a reader sees it."""

    seq: int
    processing_id: str
    key: str
    data: str
    commit_ms: int
    batch_id: int

    @cached_property  # computed once per entry read (the hub's: once per pod), not once per client
    def digest(self) -> str:
        """What tells this entry from another one under the same (epoch, seq): ``digest.entry_digest``."""
        return entry_digest(self.processing_id, self.data)


@dataclass(frozen=True)
class StateItem:
    seq: int
    processing_id: str
    data: object


@dataclass(frozen=True)
class Snapshot:
    """The latest result per key, consistent with ``seq``: replaying entries after ``seq`` on top of it
    gives the current state."""

    epoch: str
    seq: int
    items: dict[str, StateItem]
    digest: str | None = None  # of the entry at ``seq``, read with the state (None: an empty or trimmed log)
