"""Client sessions in Redis hashes: the last position a client acknowledged, shared by every pod.

Key ``sparkwire:session:{<id>}:<stream>``: the hash tag is the session id, so sessions spread over a
Redis Cluster instead of piling onto the stream's slot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis.asyncio as redis_async

from sparkwire.replaylog.keys import DEFAULT_PREFIX


@dataclass(frozen=True)
class SessionPosition:
    """The last ack of a session, and the duplicate and gap counts its client reported with it."""

    epoch: str
    seq: int
    duplicates: int = 0
    gaps: int = 0


def session_key(session_id: str, stream: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:session:{{{session_id}}}:{stream}"


def _now_ms() -> int:
    return int(time.time() * 1000)


class SessionStore:
    def __init__(self, client: redis_async.Redis, *, ttl_seconds: int, pod: str) -> None:
        self.client = client
        self.ttl_seconds = ttl_seconds
        self.pod = pod

    async def load(self, session_id: str, stream: str) -> SessionPosition | None:
        fields = ["epoch", "seq", "duplicates", "gaps"]
        epoch, seq, duplicates, gaps = await self.client.hmget(session_key(session_id, stream), fields)
        if epoch is None or seq is None:
            return None
        return SessionPosition(epoch=epoch.decode() if isinstance(epoch, bytes) else str(epoch), seq=int(seq),
                               duplicates=int(duplicates or 0), gaps=int(gaps or 0))

    async def connected(self, session_id: str, stream: str) -> None:
        key = session_key(session_id, stream)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"pod": self.pod, "connected_ms": _now_ms(), "stream": stream})
            pipe.expire(key, self.ttl_seconds)
            await pipe.execute()

    async def acked(self, session_id: str, stream: str, position: SessionPosition) -> None:
        key = session_key(session_id, stream)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={
                "epoch": position.epoch, "seq": position.seq, "duplicates": position.duplicates,
                "gaps": position.gaps,
                "pod": self.pod, "updated_ms": _now_ms(),
            })
            pipe.expire(key, self.ttl_seconds)
            await pipe.execute()
