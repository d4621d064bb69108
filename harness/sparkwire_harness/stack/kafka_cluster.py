"""A real 3-broker Apache Kafka cluster (KRaft, every node ``broker,controller``, a static quorum) run from the
same Maven jars as :class:`KafkaBroker`, each link between nodes optionally routed through a proxy (``route``).

Listeners of node j, all on 127.0.0.1:

* PLAINTEXT, direct: the producer and admin clients (``bootstrap``);
* SPARK, advertised at ``route("spark-kafka-b{j}", port)``: a client that bootstraps there is told the routed
  address of every leader, so it never bypasses the route after the first request (as ``ProxiedKafkaBroker``);
* INTERNAL, advertised at ``route("kafka-repl-b{j}", port)``: the inter-broker listener followers fetch from;
* CONTROLLER_FROM_B{i}, one per node i, advertised at ``route("kafka-ctl-b{i}-b{j}", port)``: node i's Raft
  requests, broker registration and heartbeats to node j (``_controller_listener``); i = j is direct.

The quorum is static (``controller.quorum.voters``, storage formatted without ``--standalone``, so
``controller.quorum.bootstrap.servers`` is left out): node i lists voter j at the route from i to j.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .kafka_broker import QUICK_JIT, KafkaBroker, create_topic, random_cluster_id
from .ports import free_port
from .process import ManagedProcess

# (link name, upstream port on 127.0.0.1) -> the port clients of that link connect to.
Route = Callable[[str, int], int]


# Failure detection fast enough for tests, and still not set off by a busy 2-core machine:
_TIMINGS = {
    # A broker whose heartbeats stop (crash, or cut from the controllers) is fenced after 4 s, and the
    # controller then moves its partitions' leadership (default 9 s); 4 heartbeats fit in it (default 2 s).
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    # A follower that has not caught up for 10 s leaves the ISR (default 30 s). Above the session timeout, so
    # a dead broker is fenced (and dropped from every ISR at once) before a leader would shrink the ISR one
    # partition at a time, and far above a GC pause or a starved JVM here, which must not cost an ISR member.
    "replica.lag.time.max.ms": "10000",
}


def _controller_listener(source: int) -> str:
    """The name of the controller listener that node ``source`` connects to on every node.

    A follower does not keep connecting to the leader at the address its own config gives: the leader's
    BeginQuorumEpoch, Vote and Fetch answers carry the leader's advertised endpoint of each of its controller
    listeners (KIP-853, in static quorums too), and the follower uses the one of its own listener name from
    then on. With one listener per source, each advertised at the route from that source, the endpoint a
    node learns is still the route meant for it; with one shared listener it would bypass the route.
    """
    return f"CONTROLLER_FROM_B{source}"


class KafkaNode(KafkaBroker):
    """One node of a :class:`KafkaCluster`: the broker part answers on ``port`` (PLAINTEXT), its data in
    ``<workdir>/data`` survives ``stop``/``kill`` and ``start``."""

    def __init__(self, workdir: Path, node_id: int, cluster_size: int, *, heap: str) -> None:
        super().__init__(workdir, heap=heap)
        self.node_id = node_id
        self.cluster_size = cluster_size
        self.internal_port = free_port()
        self.spark_port = free_port()
        # One controller listener per node that connects to this one (see _controller_listener); this node's
        # own broker uses controller_port, inherited.
        self.controller_ports = {source: self.controller_port if source == node_id else free_port()
                                 for source in range(1, cluster_size + 1)}
        # Set by the cluster once every node's ports are known.
        self.routed_internal_port = self.internal_port
        self.routed_spark_port = self.spark_port
        self.routed_controller_ports = dict(self.controller_ports)
        self.voters = ""
        self.cluster_id = ""
        self.process = ManagedProcess(f"kafka-b{node_id}", self.process.command, self.workdir)

    def server_properties(self) -> dict[str, str]:
        properties = super().server_properties()
        # Static voters; the bootstrap servers are for a dynamic quorum and would conflict.
        del properties["controller.quorum.bootstrap.servers"]
        sources = sorted(self.controller_ports, key=lambda source: source != self.node_id)  # our own first
        controllers = [_controller_listener(source) for source in sources]
        # acks=all is acknowledged once 2 of 3 hold a record: one node may be down, none is lost then.
        rf, min_isr = str(self.cluster_size), str(min(2, self.cluster_size))
        return properties | _TIMINGS | {
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            # The first name is the one this node connects to the other controllers with.
            "controller.listener.names": ",".join(controllers),
            "listeners": ",".join([
                f"PLAINTEXT://127.0.0.1:{self.port}", f"INTERNAL://127.0.0.1:{self.internal_port}",
                f"SPARK://127.0.0.1:{self.spark_port}",
                *(f"{_controller_listener(s)}://127.0.0.1:{self.controller_ports[s]}" for s in sources),
            ]),
            "advertised.listeners": ",".join([
                f"PLAINTEXT://127.0.0.1:{self.port}", f"INTERNAL://127.0.0.1:{self.routed_internal_port}",
                f"SPARK://127.0.0.1:{self.routed_spark_port}",
                *(f"{_controller_listener(s)}://127.0.0.1:{self.routed_controller_ports[s]}" for s in sources),
            ]),
            "listener.security.protocol.map": ",".join(
                f"{name}:PLAINTEXT" for name in ["PLAINTEXT", "INTERNAL", "SPARK", *controllers]),
            "inter.broker.listener.name": "INTERNAL",
            "default.replication.factor": rf, "min.insync.replicas": min_isr,
            "unclean.leader.election.enable": "false",
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf, "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": rf, "share.coordinator.state.topic.min.isr": min_isr,
        }

    def _format_command(self) -> list[str] | None:
        """``kafka-storage format`` with the cluster's id and no ``--standalone``: the voters of the config make
        it a static quorum. None once formatted (a restart keeps its data)."""
        if (self.data_dir / "meta.properties").exists():
            return None
        return [self._java, "-Xmx256m", *QUICK_JIT, "-cp", self._libs_classpath,
                f"-Dlog4j2.configurationFile={self._log4j}",
                "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(self.properties_path)]

    def _format_storage(self) -> None:
        if (command := self._format_command()) is not None:
            result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
            if result.returncode != 0:
                raise RuntimeError(f"formatting node {self.node_id} failed:\n{result.stdout}\n{result.stderr}")

    def launch(self) -> None:
        """Start without waiting (``start`` waits): a node is ready only once a quorum of them runs."""
        self._write_properties()
        self._format_storage()
        self.process.start()

    def ready(self) -> bool:
        """This node answers metadata, and its metadata lists every broker of the cluster (none fenced)."""
        return super().ready() and len(self.admin().list_topics(timeout=2).brokers) == self.cluster_size


class KafkaCluster:
    """``size`` :class:`KafkaNode` s (ids 1..size) in ``<workdir>/b<id>``, one cluster id, a static quorum of
    all of them. Links between nodes and the SPARK listeners cross ``route`` (direct when None); ``route`` is
    called here, once per link, so whatever it creates (a proxy) must exist before the cluster starts."""

    def __init__(self, workdir: Path, size: int = 3, *, route: Route | None = None, heap: str = "384m") -> None:
        self.workdir = Path(workdir)
        self.size = size
        route = route if route is not None else lambda _link, port: port
        self.nodes = [KafkaNode(self.workdir / f"b{i}", i, size, heap=heap) for i in range(1, size + 1)]
        cluster_id = random_cluster_id()
        for node in self.nodes:
            node.cluster_id = cluster_id
            node.routed_spark_port = route(f"spark-kafka-b{node.node_id}", node.spark_port)
            node.routed_internal_port = route(f"kafka-repl-b{node.node_id}", node.internal_port)
            for source, port in node.controller_ports.items():
                if source != node.node_id:
                    node.routed_controller_ports[source] = route(f"kafka-ctl-b{source}-b{node.node_id}", port)
        for node in self.nodes:
            node.voters = ",".join(f"{peer.node_id}@127.0.0.1:{peer.routed_controller_ports[node.node_id]}"
                                   for peer in self.nodes)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    @property
    def spark_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{node.routed_spark_port}" for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def partition_links(self, node_id: int) -> list[str]:
        """The links to cut so that ``node_id`` is cut off from the other nodes while clients still reach it."""
        others = [peer.node_id for peer in self.nodes if peer.node_id != node_id]
        return ([f"kafka-repl-b{node_id}"] + [f"kafka-ctl-b{node_id}-b{j}" for j in others]
                + [f"kafka-ctl-b{j}-b{node_id}" for j in others])

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        """Start every node and wait until each answers metadata listing all ``size`` brokers (a quorum elected
        a controller, and every broker registered and caught up with the metadata)."""
        deadline = time.monotonic() + timeout
        try:
            for node in self.nodes:
                node._write_properties()
            # One JVM per format: in parallel, they take the time of one.
            formats = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                       for c in (node._format_command() for node in self.nodes) if c is not None]
            for process in formats:
                output, _ = process.communicate(timeout=120)
                if process.returncode != 0:
                    raise RuntimeError(f"formatting Kafka storage failed ({process.returncode}):\n{output}")
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.process.wait_ready(node.ready, max(1.0, deadline - time.monotonic()), interval=0.5)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every node at once (SIGKILL after ``timeout``): one by one, the last nodes would wait for
        a quorum that the first ones took away."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda node: node.stop(timeout), self.nodes))

    def restart_node(self, node_id: int, timeout: float = 90.0) -> None:
        """Start a killed or stopped node again from its data; wait until it is back in the ISR of every
        partition it replicates."""
        deadline = time.monotonic() + timeout
        node = self.node(node_id)
        node.stop()
        node.launch()
        node.process.wait_ready(node.ready, timeout, interval=0.5)
        self.wait_in_sync(node_id, max(1.0, deadline - time.monotonic()))

    def wait_in_sync(self, node_id: int, timeout: float = 90.0) -> None:
        """Wait until ``node_id`` is in the ISR of every partition (of every topic) it is a replica of."""
        def in_sync() -> bool:
            topics = self._admin().list_topics(timeout=5).topics.items()
            replicated = [(name, p.id) for name, topic in topics for p in topic.partitions.values()
                          if node_id in p.replicas]
            # The majority's view: the node itself may still answer from metadata it had before it was cut off.
            return all(node_id in self._partition_view(topic, p)[1] for topic, p in replicated)

        self._wait(in_sync, timeout, f"node {node_id} in the ISR of all its partitions")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(f"--- node {node.node_id} ({'running' if node.process.alive else 'exited'}, "
                         f"{node.process.log_path}) ---\n{node.log_tail(lines)}" for node in self.nodes)

    # -- topics --------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 2, replication_factor: int | None = None,
                     timeout: float = 60.0) -> None:
        """Create ``name`` (no-op if it exists, RF ``size`` by default); wait until every partition has a
        leader and all its replicas in the ISR."""
        admin = self._admin()
        rf = replication_factor if replication_factor is not None else self.size
        create_topic(admin, name, partitions, rf, timeout)
        self._wait(lambda: all(leader >= 0 and len(isr) == rf for leader, isr in
                               (self._partition_view(name, p) for p in range(partitions))),
                   timeout, f"topic {name!r} with a leader and {rf} in-sync replicas per partition")

    def leader_of(self, topic: str, partition: int = 0) -> KafkaNode:
        leader, _ = self._partition_view(topic, partition)
        if leader < 0:
            raise LookupError(f"{topic}-{partition} has no leader")
        return self.node(leader)

    def isr_of(self, topic: str, partition: int = 0) -> list[int]:
        return sorted(self._partition_view(topic, partition)[1])

    # -- views ---------------------------------------------------------------------------------------

    def _admin(self) -> AdminClient:
        running = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes if node.process.alive)
        return AdminClient({"bootstrap.servers": running or self.bootstrap, "socket.timeout.ms": 5000})

    def _partition_view(self, topic: str, partition: int) -> tuple[int, tuple[int, ...]]:
        """(leader, ISR) of a partition as a majority of the nodes' metadata has it. Each node is asked on its
        own: one cut off from the controllers still answers with what it last knew (itself the leader)."""
        views: list[tuple[int, tuple[int, ...]]] = []
        for node in self.nodes:
            if not node.process.alive:
                continue
            try:
                described = node.admin().list_topics(topic=topic, timeout=3).topics[topic].partitions[partition]
            except (KafkaException, KeyError):
                continue
            views.append((described.leader, tuple(sorted(described.isrs))))
        agreed = Counter(views).most_common(1)
        if not agreed or agreed[0][1] < self.size // 2 + 1:
            raise LookupError(f"no majority of nodes agrees on {topic}-{partition}: {views}")
        return agreed[0][0]

    @staticmethod
    def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
        deadline, last_error = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except (KafkaException, LookupError) as error:
                last_error = error
            time.sleep(0.25)
        raise TimeoutError(f"no {what} after {timeout:.0f}s (last error: {last_error!r})")
