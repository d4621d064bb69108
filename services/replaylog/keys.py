"""Redis key names of one stream's replay log.

Every key of a stream carries the same hash tag, ``{<stream>}``, so that the commit script, which
touches all of them, runs on one Redis Cluster slot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STREAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
DEFAULT_PREFIX = "sparkwire"


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

    def all(self) -> tuple[str, str, str, str]:
        """The keys in the order the commit script takes them (KEYS[1..4])."""
        return (self.log, self.meta, self.state, self.ids)
