"""``deliver(..., mode="realtime")``: a stateless query under Spark's real-time trigger, each output row an
entry of the replay log within milliseconds, exactly once across re-sent rows.

Real-time mode (Spark 4.1+, ``trigger(realTime=...)``) refuses ``foreachBatch``; its sinks are Kafka, memory,
console and ``foreach``, and PySpark's ``foreach`` hands a long batch's rows to Python only when the batch ends
(seconds). So the rows leave Spark through its Kafka sink, each with its source position, into a relay topic,
and a relay in the driver's process commits them as they arrive (``relay.py``): a row's id is its source
position (topic, partition, offset, and its index among the rows of one record), and ``lua/commit_rows.lua``
refuses a row at or below the position already committed for its topic-partition in the same atomic step
that appends it. After a failure Spark re-sends the rows since the offsets it last committed (at the end of a
long batch); those are refused and counted as duplicates. The seqs stay gap-free (one script, one
``last_seq``), the epoch is the stream's, fenced on.

Refused before the query starts (:func:`check_realtime`): a batch DataFrame, a stateful operator (Spark 4.2
runs none under real-time mode), a result without Kafka's ``topic``, ``partition`` and ``offset`` columns, a
query that can make several rows of one record (an explode, a join) without ``row_index``, a row identity
(position columns, ``row_index``) derived from a non-deterministic expression.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from sparkwire.replaylog import ReplayLogWriter
from sparkwire.replaylog.redis_url import connect
from sparkwire.spark.delivery.relay import DeadLetters, Relay, dead_letter_topic, relay_group, relay_topic
from sparkwire.spark.results.checks import _class, _nodes, nondeterministic_sources
from sparkwire.spark.results.encoding import check_encodable
from sparkwire.spark.results.relay_json import TO_JSON_OPTIONS, relay_columns, relay_decoder
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


# Plan nodes after which one source record can make several rows: they need ``row_index``.
_MULTIPLYING = {"Generate": "an explode", "Join": "a join"}


def check_realtime(frame: Any, spec: StreamSpec, row_index: str | None = None) -> None:
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
    multiplying = sorted({_MULTIPLYING[_class(node)] for node in _nodes(plan) if _class(node) in _MULTIPLYING})
    if multiplying and row_index is None:
        raise DeliveryError(
            f"deliver(mode='realtime'): the query has {' and '.join(multiplying)}, which can make several rows of "
            "one Kafka record, and a row's id is its record's position: name the row's place among them with "
            "row_index= (an integer column growing within a record: posexplode's pos; for a join matching at most "
            "one row, F.lit(0))")
    if row_index is not None:
        fields = {field.name: field.dataType.typeName() for field in frame.schema.fields}
        if fields.get(row_index) not in ("byte", "short", "integer", "long"):
            raise DeliveryError(f"deliver(mode='realtime'): row_index {row_index!r} must be an integer column of the "
                                f"result (it is {fields.get(row_index, 'missing')})")
    missing = [column for column in POSITION_COLUMNS if column not in names]
    if missing:
        raise DeliveryError(
            f"deliver(mode='realtime'): the result has no column {', '.join(map(repr, missing))}: keep Kafka's "
            "topic, partition and offset columns in it, which make each row's id (a row re-sent after a failure is "
            "recognised by its position)")
    identity = [*POSITION_COLUMNS, *([row_index] if row_index is not None else [])]
    sources = nondeterministic_sources(plan, identity)
    if sources:
        raise DeliveryError(
            f"deliver(mode='realtime'): the row's identity {identity} depends on non-deterministic expressions "
            f"({'; '.join(sources)}): a row Spark sends again after a failure would get another id and be "
            "delivered twice; keep Kafka's own topic, partition and offset, and derive row_index from the data "
            "(posexplode's pos)")
    if ID_FIELD in names:
        raise DeliveryError(f"result column {ID_FIELD!r} clashes with the field sparkwire adds to each payload")
    check_encodable(frame.schema)
    spec.check_columns(frame.schema)


@dataclass(frozen=True)
class Relaying:
    """Where a real-time query's rows go on their way to the log (``relay.py``)."""

    bootstrap: str
    topic: str
    partitions: int = 1
    retention_ms: int = 7 * 24 * 3600 * 1000


def source_bootstrap(frame: Any) -> str:
    """The ``kafka.bootstrap.servers`` of the query's first Kafka source: the relay topic's cluster by default."""
    for node in _nodes(frame._jdf.queryExecution().analyzed()):
        if _class(node) == "StreamingRelationV2":
            bootstrap = node.extraOptions().get("kafka.bootstrap.servers")
            if bootstrap is not None:
                return str(bootstrap)
    raise DeliveryError("deliver(mode='realtime'): the query reads no Kafka source with kafka.bootstrap.servers; "
                        "name the relay's cluster with Target(relay_bootstrap=...)")


def ensure_topic(relaying: Relaying, topic_name: str | None = None) -> None:
    """The relay topic (or ``topic_name`` beside it), created unless it exists (the broker's replication factor)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": relaying.bootstrap})
    name = topic_name or relaying.topic
    topic = NewTopic(name, num_partitions=relaying.partitions, config={"retention.ms": str(relaying.retention_ms)})
    try:
        admin.create_topics([topic], request_timeout=30)[name].result(30)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise


def relay_frame(frame: Any, row_index: str | None) -> Any:
    """The query's rows as relay messages (``relay.py``): key the source, value its position and the row."""
    from pyspark.sql import functions as F

    ready, columns = relay_columns(frame)
    source = F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"))
    index = F.col(f"`{row_index}`").cast("long") if row_index else F.lit(0).cast("long")
    value = F.struct(source.alias("s"), F.col("offset").alias("o"), index.alias("i"), F.struct(*columns).alias("r"))
    return ready.select(source.alias("key"), F.to_json(value, TO_JSON_OPTIONS).alias("value"))


def start_realtime(frame: Any, spec: StreamSpec, *, redis_url: str, checkpoint: str, query_name: str | None,
                   trigger: str, retention: int, replicas: int, replica_timeout_ms: int, descriptor: str,
                   row_index: str | None = None, relay_bootstrap: str | None = None) -> Any:
    """Check ``frame``, fence on the stream's epoch (created when it has none), start the relay, then the query."""
    from confluent_kafka import Consumer, Producer

    check_realtime(frame, spec, row_index)
    relaying = Relaying(relay_bootstrap or source_bootstrap(frame), relay_topic(spec.stream))
    ensure_topic(relaying)
    ensure_topic(relaying, dead_letter_topic(spec.stream))
    writer = ReplayLogWriter(connect(redis_url), spec.stream, retention=retention, replicas=replicas,
                             replica_timeout_ms=replica_timeout_ms)
    query_id = f"realtime:{query_name or spec.stream}"
    epoch = writer.commit_rows(query_id, -1, []).epoch  # the stream's epoch, created if it has none
    writer.put_descriptor(descriptor)
    # fetch.wait.max.ms is librdkafka's default (500): the broker answers a fetch as soon as a row arrives, so a
    # shorter wait adds no speed, only empty fetches for the broker to answer while the feed is quiet.
    consumer = Consumer({"bootstrap.servers": relaying.bootstrap, "group.id": relay_group(spec.stream),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([relaying.topic])
    dead_letters = DeadLetters(Producer({"bootstrap.servers": relaying.bootstrap, "enable.idempotence": True}),
                               dead_letter_topic(spec.stream))
    relay = Relay(consumer, writer, spec, relay_decoder(frame.schema), query_id=query_id, fence=epoch,
                  dead_letters=dead_letters)
    stream_writer = relay_frame(frame, row_index).writeStream
    if query_name:
        stream_writer = stream_writer.queryName(query_name)
    query = (stream_writer.format("kafka").option("kafka.bootstrap.servers", relaying.bootstrap)
             .option("topic", relaying.topic).option("kafka.linger.ms", "0").option("kafka.acks", "all")
             .option("kafka.enable.idempotence", "true").option("checkpointLocation", checkpoint)
             .outputMode("update").trigger(realTime=trigger).start())

    def stopped(error: BaseException) -> None:
        log.error("stream %s: the relay stopped (%s); stopping the real-time query", spec.stream, error)
        query.stop()

    relay.start(on_stopped=stopped, active=lambda: bool(query.isActive))
    query.sparkwire_relay = relay  # what a caller (a test, a job's health check) can look at
    return query
