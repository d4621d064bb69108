"""The local stack itself: a real Kafka broker, a durable Redis, and the process wrapper."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis as redis_lib
from confluent_kafka import Consumer, Producer

from sparkwire_harness.stack import (
    KafkaBroker,
    ManagedProcess,
    ProcessDiedError,
    ReadyTimeoutError,
    RedisServer,
    SetupMissingError,
    spark_connector_jars,
)


def produce(bootstrap: str, topic: str, messages: dict[str, str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in messages.items():
        producer.produce(topic, key=key.encode(), value=value.encode())
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> dict[str, str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.key().decode()] = msg.value().decode()
    finally:
        consumer.close()
    return got


def test_kafka_broker_round_trips_messages(kafka_broker: KafkaBroker, unique_name: str) -> None:
    kafka_broker.create_topic(unique_name, partitions=2)
    kafka_broker.create_topic(unique_name, partitions=2)  # idempotent
    topic = kafka_broker.admin().list_topics(topic=unique_name, timeout=10).topics[unique_name]
    assert len(topic.partitions) == 2

    messages = {f"k{i}": f"v{i}" for i in range(20)}
    produce(kafka_broker.bootstrap, unique_name, messages)
    assert consume(kafka_broker.bootstrap, unique_name, len(messages)) == messages


def test_kafka_broker_does_not_auto_create_topics(kafka_broker: KafkaBroker, unique_name: str) -> None:
    kafka_broker.admin().list_topics(topic=unique_name, timeout=10)
    assert unique_name not in kafka_broker.admin().list_topics(timeout=10).topics


def test_kafka_restart_keeps_topics_and_messages(tmp_path: Path) -> None:
    with KafkaBroker(tmp_path) as broker:
        broker.create_topic("kept")
        produce(broker.bootstrap, "kept", {"a": "1", "b": "2"})
        broker.restart()
        assert consume(broker.bootstrap, "kept", 2) == {"a": "1", "b": "2"}
    assert not broker.process.alive


def test_redis_keeps_data_across_restart_and_crash(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    with server:
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        server.client().set("before-restart", b"1")
        server.restart()
        assert server.client().get("before-restart") == b"1"

        server.client().rpush("before-crash", b"x", b"y")
        server.kill()  # SIGKILL: only fsync-ed AOF writes survive
        server.start()
        client = server.client()
        assert client.get("before-restart") == b"1"
        assert client.lrange("before-crash", 0, -1) == [b"x", b"y"]
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
    assert (tmp_path / "appendonlydir").is_dir()


def test_session_redis_fixture_is_usable(redis: redis_lib.Redis, unique_name: str) -> None:
    redis.set(unique_name, "v")
    assert redis.get(unique_name) == b"v"


def test_a_dead_process_is_reported_with_its_log_tail(tmp_path: Path) -> None:
    process = ManagedProcess("dies", ["bash", "-c", "echo starting; echo boom-marker >&2; exit 3"], tmp_path)
    process.start()
    with pytest.raises(ProcessDiedError, match=r"(?s)code 3.*boom-marker"):
        process.wait_ready(lambda: False, timeout=20)
    assert not process.alive
    assert process.returncode == 3
    assert "boom-marker" in process.log_tail(5)


def test_a_process_that_never_gets_ready_times_out_and_stops(tmp_path: Path) -> None:
    process = ManagedProcess("sleeper", ["sleep", "300"], tmp_path)
    process.start()
    with pytest.raises(ReadyTimeoutError, match="not ready"):
        process.wait_ready(lambda: False, timeout=0.5)
    process.stop(timeout=5)
    assert not process.alive
    process.restart()
    assert process.alive
    process.stop(timeout=5)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in {"Z", "X"}


def test_kill_takes_the_whole_process_group(tmp_path: Path) -> None:
    process = ManagedProcess("parent", ["bash", "-c", "sleep 300 & echo $! > child.pid; wait"], tmp_path)
    process.start()
    process.wait_ready(lambda: (tmp_path / "child.pid").read_text().strip() != "", timeout=10)
    child = int((tmp_path / "child.pid").read_text())
    assert not _gone(child)
    process.kill()
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


def test_spark_connector_jars_are_found_or_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [jar.name for jar in spark_connector_jars()]
    assert any(name.startswith("spark-sql-kafka-0-10_2.13-") for name in names)
    assert any(name.startswith("kafka-clients-") for name in names)
    assert not any(name.startswith(("scala-library", "slf4j", "hadoop-client")) for name in names)

    monkeypatch.setenv("SPARKWIRE_SPARK_JARS", str(tmp_path))
    with pytest.raises(SetupMissingError, match="make setup"):
        spark_connector_jars()
