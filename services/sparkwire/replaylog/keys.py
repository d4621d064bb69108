"""Redis key and field names of one stream's replay log, defined once for the Python side (the commit
script writes the same names; a test holds them together).

Every key of a stream carries the same hash tag, ``{<stream>}``, so that the commit script, which
touches all of them, runs on one Redis Cluster slot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

STREAM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
DEFAULT_PREFIX = "sparkwire"


class LogField(StrEnum):
    """The fields of one log entry (``XADD <log> <seq>-0 pid … key … data … ts … batch …``)."""

    PROCESSING_ID = "pid"
    KEY = "key"
    DATA = "data"
    COMMIT_MS = "ts"
    BATCH = "batch"


class MetaField(StrEnum):
    """The meta hash's position fields; its other fields are counters."""

    EPOCH = "epoch"
    CREATED_MS = "created_ms"
    FIRST_SEQ = "first_seq"
    LAST_SEQ = "last_seq"
    QUERY_ID = "query_id"
    LAST_BATCH = "last_batch"
    LAST_CHUNK = "last_chunk"
    LAST_COMMIT_MS = "last_commit_ms"


class InvalidStreamName(ValueError):
    pass


@dataclass(frozen=True)
class StreamKeys:
    stream: str
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not STREAM_NAME.match(self.stream):
            raise InvalidStreamName(
                f"stream name {self.stream!r} must be 1-64 characters of letters, digits, '_', '.', '-'"
            )

    @property
    def tag(self) -> str:
        return f"{self.prefix}:{{{self.stream}}}"

    @property
    def log(self) -> str:
        return f"{self.tag}:log"

    @property
    def meta(self) -> str:
        return f"{self.tag}:meta"

    @property
    def state(self) -> str:
        return f"{self.tag}:state"

    @property
    def ids(self) -> str:
        return f"{self.tag}:ids"

    @property
    def staging(self) -> str:
        """Chunks of a batch not visible yet; written and read only by the commit script."""
        return f"{self.tag}:staging"

    @property
    def positions(self) -> str:
        """A real-time stream's last committed position per source (``lua/commit_rows.lua``)."""
        return f"{self.tag}:positions"

    @property
    def descriptor(self) -> str:
        """The stream's descriptor (JSON, written by the ``sparkwire.spark`` sink): what its entries hold."""
        return f"{self.tag}:descriptor"

    def all(self) -> tuple[str, str, str, str]:
        """The keys in the order the commit script takes them (KEYS[1..4])."""
        return (self.log, self.meta, self.state, self.ids)
