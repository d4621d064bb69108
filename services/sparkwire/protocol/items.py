"""What a stream carries, as the protocol sends it: an entry of the log, the latest item per key, a
snapshot of those items. The replay log stores these; the gateway encodes them; the clients apply them.
Defined here, not in the log, so that a client depends on the protocol alone (no Redis, no Spark)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One committed result as a reader sees it."""

    seq: int
    processing_id: str
    key: str
    data: str
    commit_ms: int
    batch_id: int


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
