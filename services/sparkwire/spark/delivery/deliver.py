"""``deliver``: any streaming DataFrame into a stream of the replay log, exactly once.

Everything that can make the delivery wrong is checked before the query starts (``results/checks.py``,
``results/encoding.check_encodable``, ``StreamSpec``), so a refused query never wrote anything. The sink then
commits each micro-batch atomically with its batch id (``sink.py``), and writes the stream's descriptor.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sparkwire.replaylog import ReplayLogWriter
from sparkwire.replaylog.redis_url import connect
from sparkwire.replaylog.writer import DEFAULT_CHUNK_SIZE, DEFAULT_REPLICA_TIMEOUT_MS, DEFAULT_RETENTION
from sparkwire.spark import metrics
from sparkwire.spark.delivery.faults import FaultInjector
from sparkwire.spark.delivery.realtime import DEFAULT_REALTIME_TRIGGER, POSITION_COLUMNS, check_realtime, start_realtime
from sparkwire.spark.delivery.sink import ReplayLogSink
from sparkwire.spark.rebuild.checkpoint import last_committed, replan_unrunnable_batch
from sparkwire.spark.rebuild.rebuilder import HistoryRebuilder
from sparkwire.spark.results.checks import check_deliverable
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.source import SourceQuery
from sparkwire.spark.stream import DeliveryError, StreamSpec
from sparkwire.spark.types import OutputMode

log = logging.getLogger(__name__)

AVAILABLE = "available"
_DATAFRAME_ONLY = ("the query was given as a DataFrame; give a SourceQuery (source, events, query) so that sparkwire "
                   "can run it again over Kafka")


@dataclass(frozen=True)
class Target:
    """Where a stream goes and how it is committed."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    """``redis://host:port/db``, or ``redis+sentinel://host:port,host:port/<master>/db`` for a replicated Redis
    whose primary Sentinel names (the writer follows a failover)."""
    checkpoint: str = ".run/checkpoints/stream"
    """The query's Spark checkpoint (``checkpointLocation``): offsets, state, commit log."""
    trigger_ms: int = 1_000
    retention: int = DEFAULT_RETENTION
    chunk_size: int = DEFAULT_CHUNK_SIZE
    query_name: str | None = None
    replicas: int = 0
    """Replicas that must hold each batch before clients see it and before Spark moves on (Redis ``WAIT``).
    0 for a Redis without replicas; at least 1 with a replicated Redis, or a failover can lose the last batches
    (detected: a new epoch and a rebuild, but clients then resync). docs/replay-log.md, "Across a failover"."""
    replica_timeout_ms: int = DEFAULT_REPLICA_TIMEOUT_MS
    realtime_batch: str = DEFAULT_REALTIME_TRIGGER
    """``mode="realtime"`` only: the real-time trigger's batch duration (``trigger(realTime=...)``), Spark's
    checkpoint interval: rows are re-sent from the start of the batch a failure interrupts."""
    relay_bootstrap: str | None = None
    """``mode="realtime"`` only: the Kafka cluster of the relay topic ``sparkwire-relay.<stream>`` (the query's
    rows on their way to the log); by default the cluster of the query's first Kafka source."""

    def writer(self, stream: str) -> ReplayLogWriter:
        # What SparkwireRedisNoReplica compares the replicas online with: a job that waits for more cannot commit.
        metrics.REDIS_REPLICAS_REQUIRED.set(self.replicas)
        return ReplayLogWriter(connect(self.redis_url), stream, retention=self.retention, chunk_size=self.chunk_size,
                               replicas=self.replicas, replica_timeout_ms=self.replica_timeout_ms,
                               events=metrics.WriterMetrics())


@dataclass(frozen=True)
class Job:
    """A rebuildable delivery: what ``sparkwire.spark.main`` runs (``run``) and rebuilds (``rebuild``)."""

    query: SourceQuery
    spec: StreamSpec
    target: Target = field(default_factory=Target)
    closed_upto: Callable[[str], Mapping[int, int]] | None = None
    """For a job whose sink closes its windows itself (the metrics job): each batch's bound, read from the
    checkpoint directory given (``rebuild/plan.py``); None for Spark's own output modes."""
    window_ms: int | None = None
    """With ``closed_upto``: the length of the tumbling windows the sink closes, with which the rebuild tells
    which of a batch's events the sink dropped as late (``rebuild/plan.py``)."""


def window_unnamed(spec: StreamSpec, schema: Any) -> str | None:
    """Why the rebuild cannot find the result's windows (``window=`` not given), with the fix; None when given."""
    if spec.window is not None:
        return None
    from pyspark.sql import types as T

    structs = [f.name for f in schema.fields if isinstance(f.dataType, T.StructType)
               and {"start", "end"} <= set(f.dataType.names)]
    fix = f"window={structs[0]!r} (the window struct column)" if structs else "window=(start column, end column)"
    return f"the result's window is not named: give {fix}, which the rebuild needs to tell which windows it recomputes"


def _spec(stream: str, key: str | Sequence[str], mode: OutputMode, id_column: str | None, id_from: Sequence[str],
          event_time: str | None, window: str | tuple[str, str] | None, value_fields: Sequence[str] | None, title: str,
          units: Mapping[str, str] | None) -> StreamSpec:
    return StreamSpec(stream=stream, key=key, mode=mode, id_column=id_column, id_from=tuple(id_from),
                      event_time=event_time, window=window, value_fields=value_fields, title=title,
                      units=dict(units or {}))


def prepare_sink(query: SourceQuery | Any, spec: StreamSpec, target: Target, *, spark: Any = None,
                 faults: FaultInjector | None = None) -> tuple[Any, ReplayLogSink]:
    """The checked result DataFrame and its sink: everything :func:`deliver` does but start the query."""
    if isinstance(query, SourceQuery):
        if spark is None:
            raise ValueError("a SourceQuery needs the SparkSession (spark=...)")
        frame = query.stream(spark)
        reason = query.rebuild_unavailable(spark)
    else:
        frame, reason = query, _DATAFRAME_ONLY
    check_deliverable(frame, spec)
    encoder = ResultEncoder(spec, frame.schema)
    reason = reason or window_unnamed(spec, frame.schema)
    if reason is not None:
        # Said now, not only in the descriptor: a lost log will be reported, not rebuilt, and the fix is
        # in the query's code.
        log.warning("stream %s: a lost replay log cannot be rebuilt: %s", spec.stream, reason,
                    extra={"fields": {"event": "rebuild_unavailable_at_start", "stream": spec.stream,
                                      "reason": reason}})
    rebuilder = HistoryRebuilder(query, encoder, target.checkpoint) if reason is None else None
    descriptor = json.dumps(spec.descriptor(frame.schema, reason or AVAILABLE), separators=(",", ":"))
    sink = ReplayLogSink(target.writer(spec.stream), encoder, faults or FaultInjector.from_env(), rebuilder, descriptor,
                         reason or "")
    return frame, sink


def start(frame: Any, sink: ReplayLogSink, spec: StreamSpec, target: Target, *, trigger_ms: int | None = None) -> Any:
    """Start the checked query into its sink; returns Spark's ``StreamingQuery``. ``trigger_ms``: the
    processing-time trigger when not ``target.trigger_ms`` (0 for a source that paces itself)."""
    replan_unrunnable_batch(target.checkpoint, target.query_name or spec.stream)
    sink.rebuild_if_lost(frame.sparkSession, last_committed(target.checkpoint))
    writer = frame.writeStream
    if target.query_name:
        writer = writer.queryName(target.query_name)
    started = (
        writer.outputMode(spec.mode)
        .foreachBatch(sink)
        .option("checkpointLocation", target.checkpoint)
        .trigger(processingTime=f"{target.trigger_ms if trigger_ms is None else trigger_ms} milliseconds")
        .start()
    )
    sink.bind_query(str(started.id))
    return started


def deliver(
    query: SourceQuery | Any,
    *,
    stream: str,
    key: str | Sequence[str],
    mode: OutputMode | Literal["realtime"] = "append",
    id_column: str | None = None,
    id_from: Sequence[str] = (),
    event_time: str | None = None,
    window: str | tuple[str, str] | None = None,
    value_fields: Sequence[str] | None = None,
    title: str = "",
    units: Mapping[str, str] | None = None,
    target: Target | None = None,
    spark: Any = None,
    row_index: str | None = None,
) -> Any:
    """Deliver ``query`` exactly once into ``stream``; returns the started ``StreamingQuery``.

    ``query`` is a :class:`SourceQuery` (rebuildable: ``spark`` needed) or a streaming DataFrame (a lost log
    is then reported, not rebuilt). The other arguments are :class:`StreamSpec`'s and :class:`Target`'s;
    ``window`` is Spark's window struct column by name (``"window"``) or a pair (start column, end column).
    ``mode="realtime"``: a stateless streaming DataFrame under Spark's real-time trigger, each row an entry
    (``delivery/realtime.py``); its rows' ids are their Kafka positions (no ``id_column``/``id_from``), and
    ``row_index`` numbers the rows one record makes when the query can make several (posexplode's pos).
    Raises :class:`~sparkwire.spark.stream.DeliveryError` or
    :class:`~sparkwire.spark.results.encoding.UnencodableSchema` before anything starts.
    """
    target = target or Target()
    if mode == "realtime":
        return _deliver_realtime(query, stream=stream, key=key, id_column=id_column, id_from=id_from,
                                 event_time=event_time, window=window, value_fields=value_fields, title=title,
                                 units=units, target=target, row_index=row_index)
    spec = _spec(stream, key, mode, id_column, id_from, event_time, window, value_fields, title, units)
    frame, sink = prepare_sink(query, spec, target, spark=spark)
    return start(frame, sink, spec, target)


def _deliver_realtime(query: Any, *, stream: str, key: str | Sequence[str], id_column: str | None,
                      id_from: Sequence[str], event_time: str | None, window: str | tuple[str, str] | None,
                      value_fields: Sequence[str] | None, title: str, units: Mapping[str, str] | None,
                      target: Target, row_index: str | None) -> Any:
    if isinstance(query, SourceQuery):
        raise DeliveryError("deliver(mode='realtime') takes the streaming DataFrame itself: a SourceQuery's query is "
                            "the stateful part, which real-time mode cannot run")
    if id_column is not None or id_from or window is not None:
        raise DeliveryError("deliver(mode='realtime'): a row's id is its Kafka position (topic, partition, offset); "
                            "id_column, id_from and window do not apply")
    spec = _spec(stream, key, "append", None, POSITION_COLUMNS, event_time, None, value_fields, title, units)
    check_realtime(query, spec, row_index)
    document = spec.descriptor(query.schema, "the stream is delivered in real-time mode, as rows: a lost log is "
                               "reported, not rebuilt")
    document["realtime"] = True
    return start_realtime(query, spec, redis_url=target.redis_url, checkpoint=target.checkpoint,
                          query_name=target.query_name, trigger=target.realtime_batch, retention=target.retention,
                          replicas=target.replicas, replica_timeout_ms=target.replica_timeout_ms,
                          descriptor=json.dumps(document, separators=(",", ":")), row_index=row_index,
                          relay_bootstrap=target.relay_bootstrap)


def deliver_job(job: Job, spark: Any, faults: FaultInjector | None = None) -> Any:
    """Deliver a :class:`Job` (``sparkwire.spark.main``'s ``run``)."""
    frame, sink = prepare_sink(job.query, job.spec, job.target, spark=spark, faults=faults)
    return start(frame, sink, job.spec, job.target)


def foreach_batch(frame: Any, spec: StreamSpec, target: Target | None = None) -> ReplayLogSink:
    """The ``foreachBatch`` function for a query started by its user: check ``frame``, then
    ``q = frame.writeStream.outputMode(spec.mode).foreachBatch(sink)...start()`` and ``sink.bind_query(str(q.id))``.
    """
    _frame, sink = prepare_sink(frame, spec, target or Target())
    return sink
