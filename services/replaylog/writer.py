"""Commits Spark micro-batches into a stream's replay log through ``lua/commit_chunk.lua``."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from importlib import resources

import redis
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_exponential_jitter

from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.model import BatchCommit, ChunkResult, ChunkStatus, Record

DEFAULT_CHUNK_SIZE = 500
DEFAULT_RETENTION = 100_000

# Redis losing the staging hash mid-batch (a restart without AOF) asks for the batch again; more than a
# couple of times in a row means something else is writing the stream.
_RESTAGE_ATTEMPTS = 3
_STATUSES: dict[str, ChunkStatus] = {"committed": "committed", "staged": "staged", "replayed": "replayed"}

_LUA = resources.files("sparkwire.replaylog").joinpath("lua")
_COMMIT_SOURCE = _LUA.joinpath("commit_chunk.lua").read_text()
_MARK_REBUILD_SOURCE = _LUA.joinpath("mark_rebuild.lua").read_text()


class EpochFenced(RuntimeError):
    """The stream's epoch is not the one the writer fenced on: the log it wrote to is gone (Redis lost its
    data) and nothing of the batch was written. ``found`` is the stream's epoch now ('' for none)."""

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(f"stream epoch is {found!r}, the writer expected {expected!r}: the log was lost")
        self.expected = expected
        self.found = found


def plan_chunks(records: Sequence[Record], chunk_size: int, *, ordered: bool = False) -> list[list[Record]]:
    """Split a batch into chunks that are the same every time the same batch is committed.

    Spark re-runs a batch on the same input after a crash, but not necessarily with its rows in the
    same order; sorting by processingId makes chunk i hold the same records on every run, so a chunk
    marker means the same thing before and after the crash. An empty batch is one empty chunk: its
    marker still moves, so the meta hash always names the last batch Spark handed over.

    ``ordered``: the caller already put the records in an order that is the same on every run (the
    ``sparkwire.spark`` sink sorts by event time, so a key's newest result gets its highest seq); it is kept.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    in_order = list(records) if ordered else sorted(records, key=lambda r: r.processing_id)
    chunks = [in_order[i : i + chunk_size] for i in range(0, len(in_order), chunk_size)]
    return chunks or [[]]


def _decode(raw: bytes | str | int) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class ReplayLogWriter:
    """The only writer of a stream's log. Safe to call again with a batch it already committed."""

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        *,
        retention: int = DEFAULT_RETENTION,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        prefix: str | None = None,
        retry_for_seconds: float = 30.0,
    ) -> None:
        if retention < 1:
            raise ValueError(f"retention must be >= 1, got {retention}")
        self.keys = StreamKeys(stream) if prefix is None else StreamKeys(stream, prefix)
        self.client = client
        self.retention = retention
        self.chunk_size = chunk_size
        self._script = client.register_script(_COMMIT_SOURCE)
        self._mark_rebuild = client.register_script(_MARK_REBUILD_SOURCE)
        # A chunk whose reply was lost is simply sent again: the marker or the staging hash makes the second
        # call a no-op.
        self._commit_chunk = retry(
            retry=retry_if_exception_type((redis.ConnectionError, redis.TimeoutError)),
            wait=wait_exponential_jitter(multiplier=0.05, max=2.0, jitter=0.05),
            stop=stop_after_delay(retry_for_seconds),
            reraise=True,
        )(self._commit_chunk_once)

    def commit_batch(
        self,
        query_id: str,
        batch_id: int,
        records: Sequence[Record],
        *,
        between_chunks: Callable[[int, ChunkResult], None] | None = None,
        fence: str = "",
        ordered: bool = False,
    ) -> BatchCommit:
        """Commit ``records`` as batch ``batch_id``: readers see all of it, once, when its last chunk is
        committed. ``between_chunks(i, result)`` runs after each chunk but the last (a seam for fault
        injection). With a ``fence`` (an epoch), :class:`EpochFenced` is raised, nothing written by that
        chunk, unless the stream still has that epoch. ``ordered``: see :func:`plan_chunks`."""
        chunks = plan_chunks(records, self.chunk_size, ordered=ordered)
        for _attempt in range(_RESTAGE_ATTEMPTS):
            results: list[ChunkResult] = []
            for index, chunk in enumerate(chunks):
                result = self._commit_chunk(query_id, batch_id, index, len(chunks), chunk, fence)
                if result is None:
                    break  # the staged chunks are gone: send the batch again from its first chunk
                results.append(result)
                if between_chunks is not None and index < len(chunks) - 1:
                    between_chunks(index, result)
            else:
                return BatchCommit(batch_id=batch_id, chunks=tuple(results))
        raise RuntimeError(
            f"batch {batch_id}: its staged chunks vanished {_RESTAGE_ATTEMPTS} times in a row; is another "
            "writer committing to this stream?"
        )

    def stream_epoch(self) -> tuple[str, str]:
        """The stream's epoch ('' for none) and the query id of its last published batch ('' for none)."""
        epoch, query = self.client.hmget(self.keys.meta, ["epoch", "query_id"])
        return (_decode(epoch) if epoch is not None else "", _decode(query) if query is not None else "")

    def put_descriptor(self, document: str) -> None:
        """Store the stream's descriptor (JSON). Not part of a batch: it describes every batch alike, and the
        sink writes it again whenever the log is found lost."""
        self.client.set(self.keys.descriptor, document)

    def mark_rebuild(self, lost_before_ms: int | None, lost_records: int) -> str:
        """Open a rebuild of a lost log (``lua/mark_rebuild.lua``): create the epoch if the stream has none,
        count the rebuild, and mark the history before ``lost_before_ms`` as lost (None: nothing lost).
        Returns the stream's epoch, which the rebuilt and the live batches then fence on."""
        lost = -1 if lost_before_ms is None else lost_before_ms
        epoch = self._mark_rebuild(keys=[self.keys.meta], args=[secrets.token_hex(8), lost, lost_records])
        return _decode(epoch)

    def _commit_chunk_once(
        self, query_id: str, batch_id: int, index: int, count: int, chunk: Sequence[Record], fence: str = ""
    ) -> ChunkResult | None:
        """The chunk's result, or None when the script asks for the batch again from its first chunk."""
        # A fresh candidate every call: after Redis lost the log, the epoch this writer created before
        # must not come back (readers tell a lost log by its epoch). A retried chunk whose first call
        # created the epoch finds it there and ignores the candidate.
        candidate = secrets.token_hex(8)
        args: list[str | int] = [query_id, batch_id, index, count, candidate, self.retention, fence]
        for record in chunk:
            args.extend((record.processing_id, record.key, record.payload))
        status, epoch, first_seq, last_seq, appended, duplicates = self._script(
            keys=[*self.keys.all(), self.keys.staging], args=args
        )
        status_text = _decode(status)
        if status_text == "restage":
            return None
        if status_text == "fenced":
            raise EpochFenced(fence, _decode(epoch))
        if status_text not in _STATUSES:
            raise RuntimeError(f"commit script returned unknown status {status_text!r}")
        return ChunkResult(
            status=_STATUSES[status_text],
            epoch=_decode(epoch),
            first_seq=int(first_seq),
            last_seq=int(last_seq),
            appended=int(appended),
            duplicates=int(duplicates),
        )
