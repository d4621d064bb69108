"""Values that cross the replay-log contract: what the writer commits and what readers get back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# The log stores what the protocol sends: the entry, the latest item per key, a snapshot of them.
from sparkwire.protocol.items import Entry, Snapshot, StateItem

__all__ = [
    "BatchCommit", "ChunkResult", "ChunkStatus", "Entry", "History", "PositionedRecord", "Record", "Snapshot",
    "StateItem", "StreamMeta",
]

ChunkStatus = Literal["committed", "staged", "replayed"]


@dataclass(frozen=True)
class Record:
    """One result to commit. ``payload`` is a JSON document (text)."""

    processing_id: str
    key: str
    payload: str


@dataclass(frozen=True)
class PositionedRecord:
    """A row of a real-time query to commit, with where it came from: ``source`` (``"<topic>/<partition>"``),
    ``offset`` in it and ``index`` among the rows made of that one source record (0 unless the query makes
    several, as an ``explode`` does). Positions of one source only grow; a row at or below the last committed
    one is a re-sent row (``lua/commit_rows.lua``)."""

    source: str
    offset: int
    index: int
    record: Record


@dataclass(frozen=True)
class ChunkResult:
    status: ChunkStatus
    epoch: str
    first_seq: int
    last_seq: int
    appended: int
    duplicates: int


@dataclass(frozen=True)
class BatchCommit:
    """What committing one Spark batch did, summed over its chunks."""

    batch_id: int
    chunks: tuple[ChunkResult, ...]

    @property
    def appended(self) -> int:
        return sum(c.appended for c in self.chunks)

    @property
    def duplicates(self) -> int:
        return sum(c.duplicates for c in self.chunks)

    @property
    def replayed_chunks(self) -> int:
        return sum(1 for c in self.chunks if c.status == "replayed")

    @property
    def last_seq(self) -> int:
        return max(c.last_seq for c in self.chunks)


@dataclass(frozen=True)
class StreamMeta:
    """The stream's meta hash. ``epoch`` is empty for a stream nothing was ever committed to."""

    epoch: str
    first_seq: int
    last_seq: int
    last_batch: int
    last_chunk: int
    query_id: str
    created_ms: int
    last_commit_ms: int
    counters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class History:
    """The last entries of the log and the latest result per key, both as of ``seq`` (read in one
    transaction): a reader that applies ``entries`` on top of nothing and takes ``items`` as its state
    continues with the entries after ``seq``. ``entries`` are consecutive and end at ``seq`` (empty when
    nothing was asked for or committed); ``first_seq`` is the oldest seq the log still held."""

    epoch: str
    seq: int
    first_seq: int
    entries: list[Entry]
    items: dict[str, StateItem]
