"""The replay-log contract: the aggregator writes it, the gateway reads it (docs/replay-log.md)."""

from __future__ import annotations

from sparkwire.replaylog.keys import InvalidStreamName, StreamKeys
from sparkwire.replaylog.model import (
    BatchCommit,
    ChunkResult,
    Entry,
    History,
    PositionedRecord,
    Record,
    Snapshot,
    StateItem,
    StreamMeta,
)
from sparkwire.replaylog.reader import ReplayLogReader
from sparkwire.replaylog.writer import ReplayLogWriter, plan_chunks

__all__ = [
    "BatchCommit",
    "ChunkResult",
    "Entry",
    "History",
    "InvalidStreamName",
    "PositionedRecord",
    "Record",
    "ReplayLogReader",
    "ReplayLogWriter",
    "Snapshot",
    "StateItem",
    "StreamKeys",
    "StreamMeta",
    "plan_chunks",
]
