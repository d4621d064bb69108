"""Publishes produced records to Kafka with an idempotent producer, optionally paced in real time."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaError, Message, Producer

from sparkwire.producer.events import ProducedRecord, RecordKind

# How long librdkafka keeps retrying a record before it reports it failed (its `message.timeout.ms`, set
# explicitly so the final flush can wait exactly as long): a broker rescheduled by a node drain was away for
# over two minutes in the kind suite, and a flush that gave up after 60 s failed a producer librdkafka would
# have carried through.
DELIVERY_TIMEOUT_S = 300

_COUNTER_OF_KIND: dict[RecordKind, str] = {
    "event": "events", "duplicate": "duplicates", "malformed": "malformed", "late": "late", "heartbeat": "heartbeats",
}


class PublishError(RuntimeError):
    pass


@dataclass
class PublishStats:
    sent: int = 0
    events: int = 0
    duplicates: int = 0
    malformed: int = 0
    late: int = 0
    heartbeats: int = 0
    failed: int = 0


def make_producer(bootstrap: str, extra: dict[str, Any] | None = None) -> Producer:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        # idempotent: broker-side dedup of retried sends by producer id + sequence
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
        # A partition leader cut off from the other brokers keeps taking requests and answers none in time;
        # librdkafka retries it, without asking anyone else, until a request times out (30 s by default).
        # With these, the producer moves to the new leader within seconds of its election instead.
        "request.timeout.ms": 5000,
        "topic.metadata.refresh.interval.ms": 2000,
        "message.timeout.ms": DELIVERY_TIMEOUT_S * 1000,
    }
    config.update(extra or {})
    return Producer(config)


def publish(
    records: Iterable[ProducedRecord],
    *,
    producer: Producer,
    topic: str,
    realtime: bool = False,
    events_file: Path | None = None,
) -> PublishStats:
    """Send every record; with ``realtime``, at the pace of its event time. Raises if any send failed.

    ``events_file``: one JSON line per record Kafka acknowledged, written as acknowledged: ``index`` (its
    place in the produced order), ``kind``, ``value`` and the ``partition`` it went to (a heartbeat once
    per partition). The partition is what lets an oracle reason per partition, as the aggregator closes
    windows; lines of different partitions are in acknowledgement order, so readers sort by ``index``."""
    stats = PublishStats()
    errors: list[str] = []
    sink: IO[str] | None = events_file.open("w") if events_file else None

    def on_delivery(index: int, record: ProducedRecord, err: KafkaError | None, message: Message) -> None:
        if err is not None:
            stats.failed += 1
            errors.append(str(err))
        elif sink is not None:
            sink.write(json.dumps({"index": index, "kind": record.kind, "value": record.value,
                                   "partition": message.partition()}) + "\n")

    started = time.monotonic()
    partitions: list[int] | None = None
    try:
        for index, record in enumerate(records):
            if realtime:
                delay = started + record.due_ms / 1000 - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            delivered = functools.partial(on_delivery, index, record)
            if record.kind == "heartbeat":
                # Kafka orders records only within a partition: a heartbeat in each one follows
                # everything sent there before it, whichever partitions a reader is assigned.
                if partitions is None:
                    partitions = _partitions(producer, topic)
                for partition in partitions:
                    _send(producer, topic, record.value, None, delivered, partition)
            else:
                _send(producer, topic, record.value, record.key, delivered)
            producer.poll(0)
            stats.sent += 1
            counter = _COUNTER_OF_KIND[record.kind]
            setattr(stats, counter, getattr(stats, counter) + 1)
    finally:
        # Every record is delivered or reported failed within the delivery timeout: waiting that long (and a
        # little more) neither hangs nor gives up on a record librdkafka is still retrying.
        remaining = producer.flush(DELIVERY_TIMEOUT_S + 10)
        if sink is not None:
            sink.close()
    if remaining or errors:
        raise PublishError(f"{len(errors)} records failed, {remaining} undelivered: {errors[:3]}")
    return stats


def _send(producer: Producer, topic: str, value: str, key: str | None,
          on_delivery: Callable[[KafkaError | None, Message], None], partition: int | None = None) -> None:
    extra: dict[str, Any] = {} if partition is None else {"partition": partition}
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **extra)
            return
        except BufferError:
            producer.poll(0.1)  # local queue full: let deliveries drain


def _partitions(producer: Producer, topic: str) -> list[int]:
    metadata = producer.list_topics(topic, timeout=30).topics[topic]
    if metadata.error is not None or not metadata.partitions:
        raise PublishError(f"topic {topic!r} has no partitions to send heartbeats to: {metadata.error}")
    return sorted(metadata.partitions)
