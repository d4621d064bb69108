"""Publishes produced records to Kafka with an idempotent producer, optionally paced in real time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaError, Message, Producer

from sparkwire.producer.events import ProducedRecord


class PublishError(RuntimeError):
    pass


@dataclass
class PublishStats:
    sent: int = 0
    events: int = 0
    duplicates: int = 0
    malformed: int = 0
    failed: int = 0


def make_producer(bootstrap: str, extra: dict[str, Any] | None = None) -> Producer:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        # idempotent: broker-side dedup of retried sends by producer id + sequence
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
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
    """Send every record; with ``realtime``, at the pace of its event time. Raises if any send failed."""
    stats = PublishStats()
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            stats.failed += 1
            errors.append(str(err))

    started = time.monotonic()
    sink: IO[str] | None = events_file.open("w") if events_file else None
    try:
        for record in records:
            if realtime:
                delay = started + record.due_ms / 1000 - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            while True:
                try:
                    producer.produce(topic, value=record.value, key=record.key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)  # local queue full: let deliveries drain
            producer.poll(0)
            if sink is not None:
                sink.write(json.dumps({"kind": record.kind, "value": record.value}) + "\n")
            stats.sent += 1
            if record.kind == "event":
                stats.events += 1
            elif record.kind == "duplicate":
                stats.duplicates += 1
            else:
                stats.malformed += 1
    finally:
        remaining = producer.flush(60)
        if sink is not None:
            sink.close()
    if remaining or errors:
        raise PublishError(f"{len(errors)} records failed, {remaining} undelivered: {errors[:3]}")
    return stats
