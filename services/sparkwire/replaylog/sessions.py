"""Client sessions in Redis hashes: who a session id was issued to and the last position its client acked,
shared by every pod (``port.SessionRecords``).

Key ``sparkwire:session:{<id>}:<stream>``: the hash tag is the session id, so sessions spread over a Redis
Cluster instead of piling onto the stream's slot.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as redis_async
from redis.exceptions import NoScriptError

from sparkwire.replaylog.keys import DEFAULT_PREFIX
from sparkwire.replaylog.port import AckRecord, ConnectRecord, SessionLookup, SessionPosition
from sparkwire.replaylog.scripts import script_source

_CONNECTED_SOURCE = script_source("session_connected.lua")
_LOOKUP_FIELDS = ["subject", "epoch", "seq", "duplicates", "gaps", "digest", "view"]


def session_key(session_id: str, stream: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:session:{{{session_id}}}:{stream}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _session(subject: object, epoch: object, seq: object, duplicates: object, gaps: object,
             digest: object, view: object) -> SessionLookup:
    if subject is None:  # every pod writes the subject when it issues the id
        return None, None
    position = None if epoch is None or seq is None else SessionPosition(
        epoch=_text(epoch), seq=int(_text(seq)), duplicates=int(_text(duplicates or 0)), gaps=int(_text(gaps or 0)),
        digest=_text(digest or b""), view=_text(view or b""))
    return _text(subject), position


class RedisSessionRecords:
    def __init__(self, client: redis_async.Redis) -> None:
        self.client = client
        self._connected = client.register_script(_CONNECTED_SOURCE)  # for its sha

    async def lookup(self, sessions: Sequence[tuple[str, str]]) -> list[SessionLookup]:
        async with self.client.pipeline(transaction=False) as pipe:
            for session_id, stream in sessions:
                pipe.hmget(session_key(session_id, stream), _LOOKUP_FIELDS)
            replies = await pipe.execute()
        return [_session(*reply) for reply in replies]

    async def connected(self, records: Sequence[ConnectRecord], *, pod: str, ttl_seconds: int) -> None:
        """Every record's session marked connected, with its TTL: ``lua/session_connected.lua`` per session,
        in one round trip (no reader needs all at once). By EVALSHA in the pipeline, not redis-py's
        pipelined scripts, which ask SCRIPT EXISTS first: a second round trip per batch. A server that does
        not hold the script (restarted, failed over) runs none of them: loaded, and the batch sent again
        (each call sets the same fields to the same values)."""
        for attempt in (1, 2):
            try:
                async with self.client.pipeline(transaction=False) as pipe:
                    for record in records:
                        pipe.execute_command(
                            "EVALSHA", self._connected.sha, 1, session_key(record.session_id, record.stream),
                            pod, record.connected_ms, record.stream, record.subject, ttl_seconds)
                    await pipe.execute()
                return
            except NoScriptError:
                if attempt == 2:
                    raise
                await self.client.script_load(_CONNECTED_SOURCE)

    async def write(self, acks: Sequence[AckRecord], *, pod: str, ttl_seconds: int) -> None:
        async with self.client.pipeline(transaction=False) as pipe:
            for ack in acks:
                key = session_key(ack.session_id, ack.stream)
                position = ack.position
                # HSET's arguments as they go on the wire (not ``hset(mapping=...)``, which builds them from a
                # dict per ack): a pod writes one per client per ack interval.
                pipe.execute_command(
                    "HSET", key, "epoch", position.epoch, "seq", position.seq, "duplicates", position.duplicates,
                    "gaps", position.gaps, "digest", position.digest, "view", position.view, "pod", pod,
                    "updated_ms", ack.updated_ms, "subject", ack.subject)
                if ack.renew_ttl:
                    pipe.expire(key, ttl_seconds)
            await pipe.execute()
