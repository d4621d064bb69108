"""Client sessions in Redis hashes: who a session id was issued to and the last position its client acked,
shared by every pod (``port.SessionRecords``).

Key ``sparkwire:session:{<id>}:<stream>``: the hash tag is the session id, so sessions spread over a Redis
Cluster instead of piling onto the stream's slot.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as redis_async

from sparkwire.replaylog.keys import DEFAULT_PREFIX
from sparkwire.replaylog.port import AckRecord, SessionPosition

_LOOKUP_FIELDS = ["subject", "epoch", "seq", "duplicates", "gaps"]


def session_key(session_id: str, stream: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:session:{{{session_id}}}:{stream}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisSessionRecords:
    def __init__(self, client: redis_async.Redis) -> None:
        self.client = client

    async def lookup(self, session_id: str, stream: str) -> tuple[str | None, SessionPosition | None]:
        subject, epoch, seq, duplicates, gaps = await self.client.hmget(session_key(session_id, stream),
                                                                        _LOOKUP_FIELDS)
        if subject is None:  # every pod writes the subject when it issues the id
            return None, None
        position = None if epoch is None or seq is None else SessionPosition(
            epoch=_text(epoch), seq=int(seq), duplicates=int(duplicates or 0), gaps=int(gaps or 0))
        return _text(subject), position

    async def connected(self, session_id: str, stream: str, *, pod: str, subject: str, connected_ms: int,
                        ttl_seconds: int) -> None:
        key = session_key(session_id, stream)
        async with self.client.pipeline(transaction=False) as pipe:  # one round trip; no reader needs both at once
            pipe.hset(key, mapping={"pod": pod, "connected_ms": connected_ms, "stream": stream, "subject": subject})
            pipe.expire(key, ttl_seconds)
            await pipe.execute()

    async def write(self, acks: Sequence[AckRecord], *, pod: str, ttl_seconds: int) -> None:
        async with self.client.pipeline(transaction=False) as pipe:
            for ack in acks:
                key = session_key(ack.session_id, ack.stream)
                pipe.hset(key, mapping={
                    "epoch": ack.position.epoch, "seq": ack.position.seq, "duplicates": ack.position.duplicates,
                    "gaps": ack.position.gaps, "pod": pod, "updated_ms": ack.updated_ms, "subject": ack.subject,
                })
                if ack.renew_ttl:
                    pipe.expire(key, ttl_seconds)
            await pipe.execute()
