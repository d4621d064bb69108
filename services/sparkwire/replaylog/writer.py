"""Commits Spark micro-batches into a stream's replay log: every chunk staged by ``lua/stage_chunk.lua``,
then the batch published by ``lua/publish_batch.lua``, each step waited on until enough replicas hold it."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

import redis
from tenacity import RetryCallState, retry, retry_if_exception, stop_after_delay, wait_exponential_jitter

from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.model import BatchCommit, ChunkResult, ChunkStatus, PositionedRecord, Record
from sparkwire.replaylog.scripts import script_source

DEFAULT_CHUNK_SIZE = 500
DEFAULT_RETENTION = 100_000
DEFAULT_REPLICA_TIMEOUT_MS = 2_000

# Redis losing the staging hash mid-batch (a restart without AOF) asks for the batch again; more than a
# couple of times in a row means something else is writing the stream.
_RESTAGE_ATTEMPTS = 3
_STATUSES: dict[str, ChunkStatus] = {"committed": "committed", "staged": "staged", "replayed": "replayed"}

_STAGE_SOURCE = script_source("stage_chunk.lua")
_PUBLISH_SOURCE = script_source("publish_batch.lua")
_MARK_REBUILD_SOURCE = script_source("mark_rebuild.lua")
_COMMIT_ROWS_SOURCE = script_source("commit_rows.lua")


class EpochFenced(RuntimeError):
    """The stream's epoch is not the one the writer fenced on: the log it wrote to is gone (Redis lost its
    data) and nothing of the batch was written. ``found`` is the stream's epoch now ('' for none)."""

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(f"stream epoch is {found!r}, the writer expected {expected!r}: the log was lost")
        self.expected = expected
        self.found = found


class TailLost(RuntimeError):
    """The log's marker of this query is more than one batch behind the batch being committed: Redis lost
    batches it had published while keeping the epoch (a failover to a replica that lacked them, a restore of
    an older snapshot). Nothing of the batch was written. The caller starts a new epoch and rebuilds
    (:meth:`ReplayLogWriter.mark_rebuild` with ``lost_tail_of``); appending after the hole would be silent loss."""

    def __init__(self, epoch: str, last_batch: int, batch_id: int) -> None:
        super().__init__(f"the log of epoch {epoch!r} ends at batch {last_batch} but batch {batch_id} follows "
                         f"batch {batch_id - 1}: batches {last_batch + 1}..{batch_id - 1} were lost")
        self.epoch = epoch
        self.last_batch = last_batch
        self.batch_id = batch_id


class NotReplicated(RuntimeError):
    """Fewer replicas than required acknowledged a step of the commit in time (retried, then raised)."""


class CommitEvents:
    """What a writer tells its owner about replication, to count (the Spark sink exports them as metrics);
    these do nothing. Called on the committing thread; they must not raise."""

    def retrying(self, error: BaseException, attempt: int) -> None:
        """A call to Redis failed with a transient error (connection reset or refused, timeout, a read-only
        replica or a refused write during a failover) and is sent again after a backoff; ``attempt`` counts
        the failures of this call so far."""

    def not_replicated(self, acknowledged: int, required: int) -> None:
        """A ``WAIT`` after the staged batch or the publish ended with fewer replicas than required (the
        commit is retried)."""

    def republished(self, query_id: str, batch_id: int) -> None:
        """A publish of this batch was sent before and failed (its reply lost with the connection, or no
        replica acknowledged it), and sending it again published the batch: the Redis now answering did not
        have the first publish — a failover to a replica that lacked it — so the batch was published again
        from its staged chunks, with the same seqs and bytes. Also when the first try never reached Redis
        (the connection failed before it was sent), which the writer cannot tell apart."""


def _transient(error: BaseException) -> bool:
    """Worth sending the batch again: the step is idempotent and Redis may be failing over."""
    if isinstance(error, redis.ResponseError) and not isinstance(error, redis.ReadOnlyError):
        # min-replicas-to-write refused a write: the primary has lost its replicas, for now. In a pipeline
        # (with WAIT) redis-py prefixes the message ("Command # 1 (EVALSHA …) of pipeline caused error: …").
        return "NOREPLICAS" in str(error)
    return isinstance(error, (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError, NotReplicated))


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
    """The only writer of a stream's log. Safe to call again with a batch it already committed.

    ``replicas``: how many replicas must hold a staged batch before it is published, and the published batch
    before :meth:`commit_batch` returns (Redis ``WAIT``, up to ``replica_timeout_ms`` each time). 0 for a
    Redis without replicas. See docs/replay-log.md, "Across a failover"."""

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        *,
        retention: int = DEFAULT_RETENTION,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        prefix: str | None = None,
        retry_for_seconds: float = 30.0,
        replicas: int = 0,
        replica_timeout_ms: int = DEFAULT_REPLICA_TIMEOUT_MS,
        events: CommitEvents | None = None,
    ) -> None:
        if retention < 1:
            raise ValueError(f"retention must be >= 1, got {retention}")
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        self.keys = StreamKeys(stream) if prefix is None else StreamKeys(stream, prefix)
        self.client = client
        self.retention = retention
        self.chunk_size = chunk_size
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
        self.events = events or CommitEvents()
        self._stage = client.register_script(_STAGE_SOURCE)
        self._publish = client.register_script(_PUBLISH_SOURCE)
        self._mark_rebuild = client.register_script(_MARK_REBUILD_SOURCE)
        self._commit_rows = client.register_script(_COMMIT_ROWS_SOURCE)
        # The last batch this writer published, per query: a log found behind it lost it (stage_chunk.lua).
        self._published: dict[str, int] = {}
        # The (query, batch) whose publish was last sent without a confirmed, replicated reply: publishing it
        # again then tells a publish lost in a failover (CommitEvents.republished).
        self._unconfirmed_publish: tuple[str, int] | None = None
        # A call whose reply was lost, or that met a failover, is simply sent again; a batch from its first
        # chunk: a chunk already staged and a batch already published are no-ops the second time, and the
        # other calls are reads or idempotent writes.
        retrying = retry(
            retry=retry_if_exception(_transient),
            wait=wait_exponential_jitter(multiplier=0.05, max=2.0, jitter=0.05),
            stop=stop_after_delay(retry_for_seconds),
            before_sleep=self._before_retry,
            reraise=True,
        )
        self._commit_with_retries = retrying(self._commit_once)
        self._rows_with_retries = retrying(self._commit_rows_once)
        self._call = retrying(lambda call: call())

    def _before_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is not None:
            self.events.retrying(error, state.attempt_number)

    def commit_batch(
        self,
        query_id: str,
        batch_id: int,
        records: Sequence[Record],
        *,
        between_chunks: Callable[[int, ChunkResult], None] | None = None,
        fence: str = "",
        ordered: bool = False,
        consecutive: bool = True,
    ) -> BatchCommit:
        """Commit ``records`` as batch ``batch_id``: readers see all of it, once, when it is published.
        ``between_chunks(i, result)`` runs after each chunk is staged but the last (a seam for fault
        injection). With a ``fence`` (an epoch), :class:`EpochFenced` is raised, nothing written, unless the
        stream still has that epoch. ``ordered``: see :func:`plan_chunks`. ``consecutive``: the batch ids
        are Spark's own (each follows the one before), so a log whose marker is further behind lost its tail:
        :class:`TailLost`; False for a rebuild, which commits only batches with results."""
        chunks = plan_chunks(records, self.chunk_size, ordered=ordered)
        return self._commit_with_retries(query_id, batch_id, chunks, between_chunks, fence, consecutive)

    def _commit_once(
        self, query_id: str, batch_id: int, chunks: list[list[Record]],
        between_chunks: Callable[[int, ChunkResult], None] | None, fence: str, consecutive: bool,
    ) -> BatchCommit:
        for _attempt in range(_RESTAGE_ATTEMPTS):
            staged: list[ChunkResult] = []
            for index, chunk in enumerate(chunks):
                result = self._stage_chunk(query_id, batch_id, index, len(chunks), chunk, fence, consecutive)
                if result is None:
                    break  # the staged chunks are gone: send the batch again from its first chunk
                staged.append(result)
                if between_chunks is not None and index < len(chunks) - 1:
                    between_chunks(index, result)
            else:
                published = self._publish_batch(query_id, batch_id, len(chunks), fence)
                if published is not None:
                    self._published[query_id] = max(batch_id, self._published.get(query_id, -1))
                    return BatchCommit(batch_id=batch_id, chunks=(*staged[:-1], published))
        raise RuntimeError(
            f"batch {batch_id}: its staged chunks vanished {_RESTAGE_ATTEMPTS} times in a row; is another "
            "writer committing to this stream?"
        )

    def commit_rows(self, query_id: str, batch_id: int, rows: Sequence[PositionedRecord], *,
                    fence: str = "") -> ChunkResult:
        """Commit rows of a real-time query at once, in the order given (``lua/commit_rows.lua``): each row not
        at or below its source's last committed position gets the next seq; the others are re-sent rows and
        are counted as duplicates. Safe to send again (a retry after a lost reply finds its rows committed).
        ``batch_id``: the real-time batch they were read in. With a ``fence``: :class:`EpochFenced` unless the
        stream still has that epoch (nothing written)."""
        return self._rows_with_retries(query_id, batch_id, rows, fence)

    def _commit_rows_once(self, query_id: str, batch_id: int, rows: Sequence[PositionedRecord],
                          fence: str) -> ChunkResult:
        args: list[str | int] = [query_id, batch_id, secrets.token_hex(8), self.retention, fence]
        for row in rows:
            args.extend((row.source, row.offset, row.index, row.record.processing_id, row.record.key,
                         row.record.payload))
        keys = [*self.keys.all(), self.keys.positions]
        if self.replicas == 0:
            reply = list(self._commit_rows(keys=keys, args=args))
        else:
            pipe = self.client.pipeline(transaction=False)
            self._commit_rows(keys=keys, args=args, client=pipe)
            pipe.wait(self.replicas, self.replica_timeout_ms)
            raw, acknowledged = pipe.execute()
            reply = list(raw)
            if _decode(reply[0]) != "fenced" and int(acknowledged) < self.replicas:
                # Sent again: the rows the first call committed are duplicates then, and the WAIT after the
                # second call covers the first (the same connection's writes).
                self.events.not_replicated(int(acknowledged), self.replicas)
                raise NotReplicated(f"{acknowledged} of {self.replicas} replicas acknowledged the rows within "
                                    f"{self.replica_timeout_ms} ms")
        result = self._chunk_result(reply, fence)
        assert result is not None  # commit_rows.lua never asks to restage
        return result

    def stream_epoch(self) -> tuple[str, str]:
        """The stream's epoch ('' for none) and the query id of its last published batch ('' for none)."""
        epoch, query = self._call(lambda: self.client.hmget(self.keys.meta, ["epoch", "query_id"]))
        return (_decode(epoch) if epoch is not None else "", _decode(query) if query is not None else "")

    def put_descriptor(self, document: str) -> None:
        """Store the stream's descriptor (JSON). Not part of a batch: it describes every batch alike, and the
        sink writes it again whenever the log is found lost."""
        self._call(lambda: self.client.set(self.keys.descriptor, document))

    def mark_rebuild(self, lost_before_ms: int | None, lost_records: int, *, lost_tail_of: str = "") -> str:
        """Open a rebuild of a lost log (``lua/mark_rebuild.lua``): create the epoch if the stream has none,
        or replace ``lost_tail_of`` (the epoch of a log that lost its tail, :class:`TailLost`) by a new one;
        count the rebuild, and mark the history before ``lost_before_ms`` as lost (None: nothing lost).
        Returns the stream's epoch, which the rebuilt and the live batches then fence on."""
        lost = -1 if lost_before_ms is None else lost_before_ms
        self._published.clear()  # the new epoch starts without a marker (mark_rebuild.lua) or without a log
        self._unconfirmed_publish = None  # a batch committed into the new epoch is no publish again
        # A retried call finds the epoch it created (or replaced) and keeps it; it counts the rebuild twice.
        epoch = self._call(lambda: self._mark_rebuild(keys=[self.keys.meta],
                                                      args=[secrets.token_hex(8), lost, lost_records, lost_tail_of]))
        return _decode(epoch)

    def _run(self, script: Any, args: Sequence[str | int]) -> list[Any]:
        """Run one commit script and, on the same connection, ``WAIT`` for the replicas: WAIT counts the
        writes of the connection it is sent on. Every reply that lets the commit go on follows a write
        (a replay is counted), so the WAIT covers everything the batch wrote before it."""
        keys = [*self.keys.all(), self.keys.staging]
        if self.replicas == 0:
            return list(script(keys=keys, args=args))
        pipe = self.client.pipeline(transaction=False)
        script(keys=keys, args=args, client=pipe)
        pipe.wait(self.replicas, self.replica_timeout_ms)
        reply, acknowledged = pipe.execute()
        reply = list(reply)
        if _decode(reply[0]) in ("restage", "fenced", "behind"):
            return reply  # nothing was written: nothing to wait for
        if int(acknowledged) < self.replicas:
            self.events.not_replicated(int(acknowledged), self.replicas)
            raise NotReplicated(f"{acknowledged} of {self.replicas} replicas acknowledged the commit within "
                                f"{self.replica_timeout_ms} ms")
        return reply

    def _stage_chunk(
        self, query_id: str, batch_id: int, index: int, count: int, chunk: Sequence[Record], fence: str = "",
        consecutive: bool = True,
    ) -> ChunkResult | None:
        """The chunk's result, or None when the script asks for the batch again from its first chunk."""
        published = self._published.get(query_id, -1) if consecutive else -1
        args: list[str | int] = [query_id, batch_id, index, count, "1" if consecutive else "0", published, fence]
        for record in chunk:
            args.extend((record.processing_id, record.key, record.payload))
        # Only the last chunk needs the replicas: WAIT covers every write before it too.
        reply = self._run(self._stage, args) if index == count - 1 else list(
            self._stage(keys=[*self.keys.all(), self.keys.staging], args=args))
        if _decode(reply[0]) == "behind":
            last_batch = self._call(lambda: self.client.hget(self.keys.meta, "last_batch"))
            raise TailLost(_decode(reply[1]), int(_decode(last_batch)) if last_batch is not None else -1, batch_id)
        return self._chunk_result(reply, fence)

    def _publish_batch(self, query_id: str, batch_id: int, count: int, fence: str) -> ChunkResult | None:
        """The published batch's result, or None when its staged chunks are gone (stage them again)."""
        # A fresh candidate every call: after Redis lost the log, the epoch this writer created before
        # must not come back (readers tell a lost log by its epoch). A retried publish whose first call
        # created the epoch finds it there and ignores the candidate.
        args: list[str | int] = [query_id, batch_id, 0, count, secrets.token_hex(8), self.retention, fence]
        sent_before = self._unconfirmed_publish == (query_id, batch_id)
        # Until a replicated reply says what became of it (an error or NotReplicated leaves it set).
        self._unconfirmed_publish = (query_id, batch_id)
        reply = self._run(self._publish, args)
        self._unconfirmed_publish = None
        result = self._chunk_result(reply, fence)
        if sent_before and result is not None and result.status == "committed":
            self.events.republished(query_id, batch_id)
        return result

    def _chunk_result(self, reply: Sequence[Any], fence: str) -> ChunkResult | None:
        status, epoch, first_seq, last_seq, appended, duplicates = reply
        status_text = _decode(status)
        if status_text == "restage":
            return None
        if status_text == "fenced":
            # What this writer published was in the epoch it fenced on: another epoch's log owes it nothing.
            self._published.clear()
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
