"""What a Redis primary says of its replication (``INFO replication``): which replicas stream from it, how far
behind they are, and the replication id that tells one primary's history from the next one's.

The writer's ``WAIT`` (docs/replay-log.md, "Across a failover") needs online replicas; a failover shows as a
new ``master_replid`` (a promoted replica starts a new replication history and keeps the old id only as
``master_replid2``). :func:`replication_status` is pure: it reads the dict redis-py makes of the reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as redis_async

__all__ = ["ReplicaState", "ReplicationStatus", "read_replication", "read_replication_async", "replication_status"]

# A replication id is 40 hex digits. redis-py turns an INFO value of digits only into an int, which drops
# leading zeros; padding gives the id back.
_REPLID_LENGTH = 40


@dataclass(frozen=True)
class ReplicaState:
    """One ``slave<n>`` line of the primary's INFO."""

    address: str  # ip:port, as the replica announced it
    state: str  # "online" once it streams; wait_bgsave / send_bulk while it (re)syncs
    offset: int  # replication offset the replica last acknowledged (REPLCONF ACK, about every second)
    lag_seconds: int  # seconds since that acknowledgement

    @property
    def online(self) -> bool:
        return self.state == "online"


@dataclass(frozen=True)
class ReplicationStatus:
    role: str  # "master" (what a primary's URL reaches), or "slave"
    master_replid: str
    master_repl_offset: int
    replicas: tuple[ReplicaState, ...]  # every replica connected, online or still syncing

    @property
    def online(self) -> tuple[ReplicaState, ...]:
        """The replicas that can acknowledge a ``WAIT``: one still syncing holds no current copy."""
        return tuple(replica for replica in self.replicas if replica.online)

    @property
    def replicas_connected(self) -> int:
        return len(self.online)

    @property
    def lag_bytes(self) -> int:
        """How far the furthest online replica is behind: the primary's offset minus the smallest offset one
        acknowledged; 0 without online replicas (a syncing replica's offset says nothing yet). A replica
        acknowledges about once a second, so a primary taking writes shows up to a second of them here."""
        online = self.online
        if not online:
            return 0
        return max(self.master_repl_offset - min(replica.offset for replica in online), 0)

    @property
    def lag_seconds(self) -> int:
        """The largest ``lag`` of an online replica: seconds since it last acknowledged (0 or 1 when healthy)."""
        return max((replica.lag_seconds for replica in self.online), default=0)


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _fields(value: Any) -> dict[str, Any]:
    """A ``slave<n>`` value: redis-py makes a dict of ``ip=…,port=…,state=…,offset=…,lag=…``; raw text too."""
    if isinstance(value, Mapping):
        return {_text(key): item for key, item in value.items()}
    pairs = (item.partition("=") for item in _text(value).split(",") if item)
    return {key: item for key, _, item in pairs}


def _replid(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:0{_REPLID_LENGTH}d}"
    return _text(value) if value is not None else ""


def replication_status(info: Mapping[str, Any]) -> ReplicationStatus:
    """The status in an ``INFO replication`` reply as redis-py parses it (``client.info("replication")``).

    Replicas are the ``slave0``, ``slave1``, … fields (``connected_slaves`` of them); fields a Redis does not
    report count as 0.
    """
    info = {_text(key): value for key, value in info.items()}
    count = _int(info.get("connected_slaves"))
    replicas = []
    for index in range(count):
        raw = info.get(f"slave{index}")
        if raw is None:
            continue
        fields = _fields(raw)
        ip, port = _text(fields.get("ip", "")), _text(fields.get("port", ""))
        replicas.append(ReplicaState(address=f"{ip}:{port}", state=_text(fields.get("state", "")),
                                     offset=_int(fields.get("offset")), lag_seconds=_int(fields.get("lag"))))
    return ReplicationStatus(
        role=_text(info.get("role", "")),
        master_replid=_replid(info.get("master_replid")),
        master_repl_offset=_int(info.get("master_repl_offset")),
        replicas=tuple(replicas),
    )


def read_replication(client: redis.Redis) -> ReplicationStatus:
    """The replication status of the Redis ``client`` reaches (a Sentinel URL's client: the current primary)."""
    return replication_status(client.info("replication"))


async def read_replication_async(client: redis_async.Redis) -> ReplicationStatus:
    return replication_status(await client.info("replication"))
