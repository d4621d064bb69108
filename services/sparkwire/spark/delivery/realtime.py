"""``deliver(..., mode="realtime")``: a stateless query under Spark's real-time trigger, each output row an
entry of the replay log, exactly once across re-sent rows.

Real-time mode (Spark 4.1+, ``trigger(realTime=...)``) refuses ``foreachBatch``; its sinks are Kafka, memory,
console and ``foreach``. Each row goes through a PySpark ``foreach`` writer (:class:`RealtimeRowWriter`), which
commits it with ``lua/commit_rows.lua``: the row's id is its source position (topic, partition, offset, and
its index among the rows of one record), and the commit refuses a row at or below the position already
committed for its topic-partition in the same atomic step that appends it. After a failure Spark re-sends
the rows since the offsets it last committed (at the end of a long batch); those are refused and counted as
duplicates. The seqs stay gap-free (one script, one ``last_seq``), the epoch is the stream's, fenced on.

Refused before the query starts (:func:`check_realtime`): a batch DataFrame, a stateful operator (Spark 4.2
runs none under real-time mode), a result without Kafka's ``topic``, ``partition`` and ``offset`` columns.

Latency: none gained yet. PySpark's ``foreach`` (the JVM ``PythonForeachWriter``, which buffers the rows and
pickles them to the Python worker) hands a long batch's rows to ``process`` only when the batch ends: a row
waits up to the batch duration, at least 5 s (docs/deliver-your-own-query.md, "Real-time mode", measured by
bench/realtime_spike.py). A JVM writer running ``lua/commit_rows.lua`` would keep this commit and drop the wait.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

from sparkwire.replaylog import PositionedRecord, Record, ReplayLogWriter
from sparkwire.replaylog.redis_url import connect
from sparkwire.spark.results.checks import _class, _nodes
from sparkwire.spark.results.encoding import check_encodable, prepare, row_encoder
from sparkwire.spark.results.records import key_text
from sparkwire.spark.stream import ID_FIELD, DeliveryError, StreamSpec

log = logging.getLogger(__name__)

POSITION_COLUMNS = ("topic", "partition", "offset")
DEFAULT_REALTIME_TRIGGER = "5 minutes"
"""Spark's default batch duration: a checkpoint interval in real-time mode (offsets are committed, and re-sent
rows after a failure bounded, per batch), not a latency target."""
# Logical plan nodes real-time mode cannot run on Spark 4.2 (state or a shuffle).
_STATEFUL = {
    "Aggregate": "a streaming aggregation (groupBy/agg, window)",
    "Deduplicate": "dropDuplicates",
    "DeduplicateWithinWatermark": "dropDuplicatesWithinWatermark",
    "FlatMapGroupsWithState": "flatMapGroupsWithState/applyInPandasWithState",
    "TransformWithState": "transformWithState",
    "TransformWithStateInPySpark": "transformWithStateInPandas",
    "Sort": "a sort",
    "Distinct": "distinct",
}


def _streaming_sides(join: Any) -> bool:
    return bool(join.left().isStreaming()) and bool(join.right().isStreaming())


def _kafka_readings(plan: Any) -> list[tuple[str, str]]:
    """(how, what) of each Kafka source the plan reads: ``subscribe`` and its topics, ``assign`` and its JSON,
    ``subscribePattern`` and its pattern."""
    readings = []
    for node in _nodes(plan):
        if _class(node) != "StreamingRelationV2":
            continue
        options = node.extraOptions()
        for how in ("subscribe", "assign", "subscribePattern"):
            value = options.get(how)
            if value is not None:
                readings.append((how, str(value)))
    return readings


def _topics(how: str, value: str) -> set[str]:
    if how == "subscribe":
        return {topic.strip() for topic in value.split(",") if topic.strip()}
    return set(json.loads(value))  # assign: {"topic": [partitions]}


def check_one_reading_per_topic(plan: Any) -> None:
    """Positions are kept per topic-partition: two sources reading one topic would interleave their rows'
    positions, and the commit would refuse one reading's rows as re-sent. Refused; so is a pattern among
    several sources (which topics it reads is known only when it runs)."""
    readings = _kafka_readings(plan)
    if len(readings) < 2:
        return
    if any(how == "subscribePattern" for how, _value in readings):
        raise DeliveryError("deliver(mode='realtime'): the query reads Kafka with subscribePattern and another "
                            "source; a topic read twice would have its rows refused as re-sent: subscribe to the "
                            "topics by name, each in one source")
    seen: set[str] = set()
    for how, value in readings:
        twice = sorted(seen & _topics(how, value))
        if twice:
            raise DeliveryError(f"deliver(mode='realtime'): the query reads topic(s) {twice} in two sources (a "
                                "self-union?); a row's id is its topic-partition position, so one reading's rows "
                                "would be refused as re-sent: read each topic once")
        seen |= _topics(how, value)


def check_realtime(frame: Any, spec: StreamSpec) -> None:
    """Raise :class:`DeliveryError` for a query real-time mode cannot run, or sparkwire cannot commit once."""
    if not frame.isStreaming:
        raise DeliveryError("deliver(mode='realtime') needs a streaming DataFrame (spark.readStream...); this one "
                            "is a batch DataFrame")
    plan = frame._jdf.queryExecution().analyzed()
    for node in _nodes(plan):
        name = _class(node)
        if name in _STATEFUL:
            raise DeliveryError(
                f"deliver(mode='realtime'): the query has {_STATEFUL[name]} ({name}), a stateful operator; Spark's "
                "real-time mode runs stateless queries only (filters, projections, explode, unions, joins with a "
                "static table): deliver it with mode='append' or 'update' (micro-batches)")
        if name == "Join" and _streaming_sides(node):
            raise DeliveryError("deliver(mode='realtime'): the query joins two streams (stateful); Spark's real-time "
                                "mode joins a stream with a static table only")
    check_one_reading_per_topic(plan)
    names = set(frame.schema.names)
    missing = [column for column in POSITION_COLUMNS if column not in names]
    if missing:
        raise DeliveryError(
            f"deliver(mode='realtime'): the result has no column {', '.join(map(repr, missing))}: keep Kafka's "
            "topic, partition and offset columns in it, which make each row's id (a row re-sent after a failure is "
            "recognised by its position)")
    if ID_FIELD in names:
        raise DeliveryError(f"result column {ID_FIELD!r} clashes with the field sparkwire adds to each payload")
    check_encodable(frame.schema)
    spec.check_columns(frame.schema)


# One writer per Python worker process and stream: a worker runs many tasks, one after the other.
_WRITERS: dict[tuple[str, str], ReplayLogWriter] = {}


class RealtimeRowWriter:
    """The ``foreach`` writer: each row committed as it comes (``process``), once (``lua/commit_rows.lua``).
    Pickled to the Python workers; holds only plain values and the schema."""

    def __init__(self, spec: StreamSpec, schema: Any, *, redis_url: str, query_id: str, fence: str,
                 retention: int, replicas: int, replica_timeout_ms: int) -> None:
        self.spec = spec
        self.schema = schema
        self.redis_url = redis_url
        self.query_id = query_id
        self.fence = fence
        self.retention = retention
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
        self._encode: Any = None
        self._writer: ReplayLogWriter | None = None
        self._epoch_id = 0
        self._last: tuple[str, int] | None = None  # the last row's (source, offset), and how many rows it made
        self._index = 0

    def open(self, partition_id: int, epoch_id: int) -> bool:
        if self._writer is None:
            cache = (self.redis_url, self.spec.stream)
            if cache not in _WRITERS:
                _WRITERS[cache] = ReplayLogWriter(connect(self.redis_url), self.spec.stream, retention=self.retention,
                                                  replicas=self.replicas, replica_timeout_ms=self.replica_timeout_ms)
            self._writer = _WRITERS[cache]
            self._encode = row_encoder(self.schema)
        self._epoch_id = epoch_id
        self._last, self._index = None, 0
        return True

    def record(self, row: Any) -> PositionedRecord:
        """The row as a positioned record: its id from its source position."""
        payload = self._encode(row)
        source, offset = f"{payload['topic']}/{payload['partition']}", int(payload["offset"])
        # Rows of one source record come one after the other (an explode's), in the same order on a re-run.
        self._index = self._index + 1 if self._last == (source, offset) else 0
        self._last = (source, offset)
        pid = f"{source}/{offset}" + (f"#{self._index}" if self._index else "")
        payload[ID_FIELD] = pid
        key = key_text([payload[name] for name in self.spec.keys])
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return PositionedRecord(source, offset, self._index, Record(pid, key, text))

    def process(self, row: Any) -> None:
        assert self._writer is not None
        self._writer.commit_rows(self.query_id, self._epoch_id, [self.record(row)], fence=self.fence)

    def close(self, error: BaseException | None) -> None:
        """Nothing to flush: every row was committed by ``process``."""


def start_realtime(frame: Any, spec: StreamSpec, *, redis_url: str, checkpoint: str, query_name: str | None,
                   trigger: str, retention: int, replicas: int, replica_timeout_ms: int, descriptor: str) -> Any:
    """Check ``frame``, fence on the stream's epoch (created when it has none) and start the query."""
    check_realtime(frame, spec)
    ready = prepare(frame)
    writer = ReplayLogWriter(connect(redis_url), spec.stream, retention=retention, replicas=replicas,
                             replica_timeout_ms=replica_timeout_ms)
    query_id = f"realtime:{query_name or spec.stream}"
    epoch = writer.commit_rows(query_id, -1, []).epoch  # the stream's epoch, created if it has none
    writer.put_descriptor(descriptor)
    row_writer = RealtimeRowWriter(spec, ready.schema, redis_url=redis_url, query_id=query_id, fence=epoch,
                                   retention=retention, replicas=replicas, replica_timeout_ms=replica_timeout_ms)
    context = frame.sparkSession.sparkContext
    if "PYSPARK_PYTHON" not in os.environ:
        # The writer runs in Python workers, which must import sparkwire: this interpreter (the same path in the
        # driver's image) rather than PySpark's default, the `python3` of the PATH. PYSPARK_PYTHON, when set, wins.
        context.pythonExec = sys.executable
    stream_writer = ready.writeStream
    if query_name:
        stream_writer = stream_writer.queryName(query_name)
    return (stream_writer.outputMode("update").foreach(row_writer).option("checkpointLocation", checkpoint)
            .trigger(realTime=trigger).start())
