"""The chaos run's network faults on real links: toxiproxy in front of a real Redis and of a real Kafka
broker. A blackhole is silent (requests time out, nothing is closed) until it heals; a reset and a cut
end connections; Kafka clients bootstrapped on the proxy never bypass it."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis as redis_lib
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from sparkwire_harness.chaos.topology import ProxiedKafkaBroker
from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import RedisServer, free_port


def test_blackhole_reset_and_cut_between_a_client_and_redis(toxiproxy: Toxiproxy, redis_server: RedisServer) -> None:
    port = toxiproxy.create_proxy("redis", redis_server.port)
    client = redis_lib.Redis(port=port, socket_timeout=1.0, socket_connect_timeout=1.0)
    client.set("chaos-links", b"x" * 200)
    assert client.ping()

    toxics = toxiproxy.add_fault("redis", "hole", "blackhole", {})
    with pytest.raises(redis_lib.TimeoutError):  # no error, no close: only the client's own timeout
        client.ping()
    toxiproxy.remove("redis", toxics)
    assert client.ping()  # healed: the connection through the hole was closed, a new one works

    toxics = toxiproxy.add_fault("redis", "reset", "reset", {})
    with pytest.raises(redis_lib.ConnectionError):
        client.ping()
    toxiproxy.remove("redis", toxics)
    assert client.ping()

    toxics = toxiproxy.add_fault("redis", "cut", "cut", {"bytes": 50})
    with pytest.raises(redis_lib.ConnectionError):  # the reply is cut after 50 of its ~206 bytes
        client.get("chaos-links")
    toxiproxy.remove("redis", toxics)
    assert client.get("chaos-links") == b"x" * 200


def test_a_restart_drops_every_toxic_and_keeps_every_proxy_on_its_port(
    toxiproxy: Toxiproxy, redis_server: RedisServer,
) -> None:
    """The way out of a wedged API (``remove_all``): the link works again, on the same port, untoxic."""
    port = toxiproxy.create_proxy("redis", redis_server.port)
    client = redis_lib.Redis(port=port, socket_timeout=1.0, socket_connect_timeout=1.0)
    toxiproxy.add_fault("redis", "hole", "blackhole", {})
    with pytest.raises(redis_lib.TimeoutError):
        client.ping()
    toxiproxy.restart()
    assert toxiproxy.listen_ports["redis"] == port and toxiproxy.restarts == 1
    assert client.ping()  # the old connection died with the old server; a new one passes


def test_a_kafka_client_bootstrapped_on_the_proxy_is_sent_back_to_it(toxiproxy: Toxiproxy, tmp_path: Path) -> None:
    kafka = ProxiedKafkaBroker(tmp_path / "kafka", proxy_port=free_port())
    with kafka:
        toxiproxy.create_proxy("spark-kafka", kafka.spark_port, listen_port=kafka.proxy_port)
        kafka.create_topic("links", partitions=2)
        brokers = AdminClient({"bootstrap.servers": kafka.spark_bootstrap}).list_topics(timeout=15).brokers
        # The metadata names the proxy, so every later connection goes through it too.
        assert {f"{b.host}:{b.port}" for b in brokers.values()} == {kafka.spark_bootstrap}
        plain = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=15).brokers
        assert {f"{b.host}:{b.port}" for b in plain.values()} == {kafka.bootstrap}

        toxics = toxiproxy.add_fault("spark-kafka", "hole", "blackhole", {})
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": kafka.spark_bootstrap}).list_topics(timeout=3)
        toxiproxy.remove("spark-kafka", toxics)
        assert AdminClient({"bootstrap.servers": kafka.spark_bootstrap}).list_topics(timeout=15).topics["links"]
