"""`sparkwire produce --events-file` against a real two-partition topic: every line names the partition its
record is in, in Kafka's order there, so the oracle can reason per partition as the aggregator does."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from sparkwire_harness.stack import KafkaBroker
from sparkwire_harness.verify import read_produced


def test_every_line_names_the_partition_its_record_is_in(kafka_broker: KafkaBroker, unique_name: str,
                                                         tmp_path: Path) -> None:
    topic = f"{unique_name}-raw"
    kafka_broker.create_topic(topic, partitions=2)
    events_file = tmp_path / "events.jsonl"
    produce = subprocess.run([
        sys.executable, "-m", "sparkwire.cli", "produce", "--bootstrap-servers", kafka_broker.bootstrap,
        "--topic", topic, "--count", "400", "--rate", "200", "--sources", "7", "--heartbeat-ms", "250",
        "--duplicate-ratio", "0.05", "--events-file", str(events_file), "--log-level", "WARNING",
    ], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert produce.returncode == 0, produce.stderr[-3000:]

    in_kafka: dict[int, list[str]] = defaultdict(list)
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False})
    try:
        for partition in (0, 1):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            consumer.assign([TopicPartition(topic, partition, 0)])
            while len(in_kafka[partition]) < high:
                message = consumer.poll(5)
                assert message is not None and message.error() is None, message and message.error()
                in_kafka[partition].append(message.value().decode())
    finally:
        consumer.close()

    produced = read_produced(events_file)
    by_partition: dict[int, list[str]] = defaultdict(list)
    for record in produced:
        assert record.partition is not None
        by_partition[record.partition].append(record.value)
    # Both partitions hold events (keys spread them) and each partition's lines are Kafka's records there,
    # in Kafka's order; a heartbeat is in both.
    assert set(by_partition) == {0, 1}
    assert by_partition == in_kafka
    beats = [r for r in produced if r.kind == "heartbeat"]
    assert beats and {r.partition for r in beats} == {0, 1} and len(beats) % 2 == 0
