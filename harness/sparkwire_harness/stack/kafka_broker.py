"""A real single-node Apache Kafka broker (KRaft, combined broker + controller) run from Maven jars."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from .paths import SetupMissingError, kafka_libs_dir, kafka_log4j_config
from .ports import free_port
from .process import ManagedProcess

# The JVM options of a broker started with quick_jit (the default): the JIT's first tier (C1) only. The brokers
# here are local and lightly loaded (tests, the chaos run, the demo), and they start often: C2's compiler
# threads were half of a broker's CPU up to its first answer (10.0 s of CPU and ready in 15 s, against 5.3 s
# and 9 s, on 2 cores; 100,000 records produced and consumed after it added 2.6 s against 1.6 s), and the
# tests of the Kafka cluster and the stack took 161 s of CPU against 283 s (155 s against 210 s). The
# benchmarks, which time the pipeline under load, start theirs with quick_jit=False: a broker's full JIT.
QUICK_JIT = ("-XX:TieredStopAtLevel=1",)


def _java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise SetupMissingError("java not found: install a JDK 17+ (Kafka 4 needs it)")
    return found


def random_cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding, never starting with ``-``, as
    Kafka's own ``Uuid.randomUuid`` (``kafka-storage random-uuid``) makes them: the storage tool would read
    ``-t -AbC…`` as an option and fail (one broker start in 64 did, at random)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return cluster_id


def create_topic(admin: AdminClient, name: str, partitions: int, replication_factor: int, timeout: float) -> None:
    """Create ``name`` unless it exists (then nothing happens); the caller waits for its leaders."""
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)],
                                  request_timeout=timeout)
    try:
        futures[name].result(timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise


class KafkaBroker:
    """Kafka 4 in KRaft mode on 127.0.0.1: PLAINTEXT on ``port``, CONTROLLER on ``controller_port``.

    Data lives in ``<workdir>/data`` and survives ``restart()``; storage is formatted once. ``quick_jit``:
    the JVM's first JIT tier only (:data:`QUICK_JIT`), for brokers that start often and carry little.
    """

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        controller_port: int | None = None,
        heap: str = "512m",
        quick_jit: bool = True,
    ) -> None:
        self.workdir = Path(workdir)
        self.port = port if port is not None else free_port()
        self.controller_port = controller_port if controller_port is not None else free_port()
        self.data_dir = self.workdir / "data"
        self.properties_path = self.workdir / "server.properties"
        self._libs_classpath = f"{kafka_libs_dir()}/*"
        self._log4j = kafka_log4j_config()
        self._java = _java_executable()
        command = [
            self._java, f"-Xmx{heap}", "-Xms64m", *(QUICK_JIT if quick_jit else ()),
            "-cp", self._libs_classpath,
            f"-Dlog4j2.configurationFile={self._log4j}",
            "kafka.Kafka", str(self.properties_path),
        ]  # fmt: skip
        self.process = ManagedProcess("kafka", command, self.workdir)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- configuration -------------------------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        controller = f"127.0.0.1:{self.controller_port}"
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": controller,
            "log.dirs": str(self.data_dir),
            "num.partitions": "2",
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "min.insync.replicas": "1",
            "default.replication.factor": "1",
        }

    def _write_properties(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in self.server_properties().items()]
        self.properties_path.write_text("\n".join(lines) + "\n")

    def _format_storage(self) -> None:
        """``kafka-storage format --standalone`` once: a single-voter dynamic quorum."""
        if (self.data_dir / "meta.properties").exists():
            return
        command = [
            self._java, "-Xmx256m", *QUICK_JIT, "-cp", self._libs_classpath,
            f"-Dlog4j2.configurationFile={self._log4j}",
            "kafka.tools.StorageTool", "format",
            "-t", random_cluster_id(),
            "-c", str(self.properties_path),
            "--standalone",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"formatting Kafka storage failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )

    # -- lifecycle -----------------------------------------------------------------------------------

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000})

    def ready(self) -> bool:
        """The broker answers a metadata request (a plain TCP probe first keeps librdkafka quiet)."""
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        metadata = self.admin().list_topics(timeout=2)
        return bool(metadata.brokers)

    def start(self, timeout: float = 90.0) -> None:
        self._write_properties()
        self._format_storage()
        self.process.start()
        self.process.wait_ready(self.ready, timeout, interval=0.5)

    def stop(self, timeout: float = 30.0) -> None:
        self.process.stop(timeout)

    def kill(self) -> None:
        self.process.kill()

    def restart(self, timeout: float = 90.0) -> None:
        self.stop()
        self.start(timeout)

    def log_tail(self, lines: int = 50) -> str:
        return self.process.log_tail(lines)

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- topics --------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 2, timeout: float = 30.0) -> None:
        """Create ``name`` (no-op if it exists) and wait until every partition has a leader."""
        admin = self.admin()
        create_topic(admin, name, partitions, 1, timeout)
        deadline = time.monotonic() + timeout
        while not self._topic_usable(admin, name):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"topic {name!r} has no leader for every partition after {timeout:.0f}s")
            time.sleep(0.1)

    @staticmethod
    def _topic_usable(admin: AdminClient, name: str) -> bool:
        topic = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            return False
        return all(p.leader >= 0 and p.error is None for p in topic.partitions.values())
