"""The processes and links of a chaos run, all real and local: toxiproxy, Redis, Kafka, three gateways behind
nginx — and a toxiproxy proxy on every link the schedule breaks:

    clients ──edge-0/1──► nginx ──► gateway i ──gw<i>-redis──► Redis ◄──spark-redis── Spark driver
                                                                       Kafka ◄──spark-kafka──┘
Two topologies (``--topology``):

* ``replicated`` (the default, production's shape): Redis is a primary, two replicas and three sentinels
  (``ReplicatedRedis``), Kafka three brokers (``KafkaCluster``: replication factor 3, min.insync.replicas 2).
  A link to Redis is then one proxy per data node (``gw0-redis-n0…n2``): the gateways and the driver find the
  primary through the sentinels, which name each node by its replication-link proxy (``redis-repl-n<i>``),
  and dial it through their own link's proxy (the address map, ``SPARKWIRE_REDIS_ADDRESS_MAP``). The link to
  Kafka is one proxy per broker (``spark-kafka-b1…b3``); the brokers replicate (``kafka-repl-b<i>``) and
  reach the controllers (``kafka-ctl-b<i>-b<j>``) through proxies too, so one node can be cut off from
  the others while clients still reach it. A network fault on a link hits all of its proxies.
* ``single``: one Redis (AOF) and one broker, each link one proxy.

The producer writes to Kafka directly: its own retries are not what the run checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import redis as redis_lib

from sparkwire.replaylog.redis_url import ADDRESS_MAP_ENV, connect
from sparkwire_harness.chaos.schedule import EDGES, GATEWAYS, LINKS
from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import (
    GatewayProcess,
    KafkaBroker,
    KafkaCluster,
    NginxBalancer,
    RedisServer,
    ReplicatedRedis,
    free_port,
)

STREAM = "metrics"
TOPIC = "metrics-raw"
DEAD_LETTER_TOPIC = "metrics-deadletter"
ORDERS = "orders"  # the orders example's stream and topic (sparkwire_harness.chaos.orders)
LARGE_ORDERS = "large-orders"  # the real-time feed's stream, read from ORDERS (sparkwire_harness.chaos.large_orders)
TOPOLOGIES = ("replicated", "single")
REDIS_LINKS = ("spark-redis", *LINKS["gateway-redis"])


class ProxiedKafkaBroker(KafkaBroker):
    """A broker with a second listener, SPARK, that advertises the toxiproxy address in front of it.

    A Kafka client only bootstraps at the address it is given: the metadata answer tells it where the
    partition leaders are, and it connects there. With a proxy on the bootstrap address alone, Spark would
    bypass it after the first request. Connections to the SPARK listener get the proxy's address back, so
    every byte between Spark and Kafka crosses the proxy; the producer and admin use PLAINTEXT directly.
    """

    def __init__(self, workdir: Path, proxy_port: int) -> None:
        super().__init__(workdir)
        self.spark_port = free_port()
        self.proxy_port = proxy_port

    @property
    def spark_bootstrap(self) -> str:
        return f"127.0.0.1:{self.proxy_port}"

    def server_properties(self) -> dict[str, str]:
        properties = super().server_properties()
        properties["listeners"] += f",SPARK://127.0.0.1:{self.spark_port}"
        properties["advertised.listeners"] += f",SPARK://{self.spark_bootstrap}"
        properties["listener.security.protocol.map"] += ",SPARK:PLAINTEXT"
        return properties


@dataclass
class Topology:
    workdir: Path
    toxiproxy: Toxiproxy
    redis: RedisServer | ReplicatedRedis
    kafka: ProxiedKafkaBroker | KafkaCluster
    gateways: list[GatewayProcess] = field(default_factory=list)
    nginx: NginxBalancer | None = None
    links: dict[str, list[str]] = field(default_factory=dict)
    """A link the schedule names (``gw0-redis``, ``spark-kafka``, ``edge-0`` …) -> its toxiproxy proxies."""

    @property
    def replicated(self) -> bool:
        return isinstance(self.redis, ReplicatedRedis)

    def proxy_port(self, name: str) -> int:
        return self.toxiproxy.listen_ports[name]

    def redis_access(self, link: str) -> tuple[str, dict[str, str]]:
        """The Redis URL a process on ``link`` is given and the environment it needs with it."""
        if not isinstance(self.redis, ReplicatedRedis):
            return f"redis://127.0.0.1:{self.proxy_port(link)}/0", {}
        replicated = self.redis
        mapping = ",".join(f"127.0.0.1:{replicated.announced_port(node)}=127.0.0.1:{self.proxy_port(proxy)}"
                           for node, proxy in zip(replicated.nodes, self.links[link], strict=True))
        # The writer WAITs for a replica: a batch is visible once one holds it (docs/replay-log.md).
        return replicated.url, {ADDRESS_MAP_ENV: mapping, "SPARKWIRE_REDIS_REPLICAS": "1"}

    def spark_scratch(self) -> dict[str, str]:
        """The environment that keeps a Spark driver's scratch files (``spark-*``, ``blockmgr-*``) in the run's
        directory: a SIGKILLed JVM never removes them, and in /tmp every chaos run left ~20 behind."""
        scratch = self.workdir / "spark-scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        return {"SPARK_LOCAL_DIRS": str(scratch), "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={scratch}"}

    def redis_client(self) -> redis_lib.Redis:
        """A client of Redis (its primary) that crosses no faulty link, for the run's own checks."""
        if not isinstance(self.redis, ReplicatedRedis):
            return connect(self.redis.url, socket_timeout=2.0, socket_connect_timeout=2.0)
        replicated = self.redis
        direct = {("127.0.0.1", replicated.announced_port(node)): ("127.0.0.1", node.port) for node in replicated.nodes}
        return connect(replicated.url, address_map=direct, socket_timeout=2.0, socket_connect_timeout=2.0)

    def edge_url(self, edge: str) -> str:
        return f"http://127.0.0.1:{self.proxy_port(edge)}"

    def edge_ws(self, edge: str, stream: str = STREAM) -> str:
        return f"ws://127.0.0.1:{self.proxy_port(edge)}/ws?stream={stream}"

    def stop(self) -> None:
        for step in ([self.nginx.stop] if self.nginx else []) + [g.stop for g in self.gateways] + [
                self.kafka.stop, self.redis.stop, self.toxiproxy.stop]:
            try:
                step()
            except Exception as error:  # keep stopping the rest: nothing may be left running
                print(f"[chaos] stopping: {error!r}", flush=True)


def _state(workdir: Path, toxiproxy: Toxiproxy, kind: str) -> Topology:
    """Redis and Kafka (not started) and the links to them."""
    if kind == "single":
        kafka = ProxiedKafkaBroker(workdir / "kafka", proxy_port=free_port())
        links = {link: [link] for link in (*REDIS_LINKS, "spark-kafka")}
        return Topology(workdir, toxiproxy, RedisServer(workdir / "redis"), kafka, links=links)
    if kind != "replicated":
        raise ValueError(f"unknown topology {kind!r} (one of {', '.join(TOPOLOGIES)})")

    def route(name: str, port: int) -> int:
        return toxiproxy.create_proxy(name, port)

    replicated = ReplicatedRedis(workdir / "redis", route=route)
    cluster = KafkaCluster(workdir / "kafka", 3, route=route)
    links = {link: [f"{link}-n{index}" for index in range(len(replicated.nodes))] for link in REDIS_LINKS}
    links["spark-kafka"] = [f"spark-kafka-b{node.node_id}" for node in cluster.nodes]
    return Topology(workdir, toxiproxy, replicated, cluster, links=links)


def start_topology(workdir: Path, auth_secret: str, gateway_args: list[str], kind: str = "replicated") -> Topology:
    """Everything but the aggregator, the producer and the clients, ready to serve; ``stop()`` on failure
    is the caller's (it holds the result only once this returns)."""
    toxiproxy = Toxiproxy(workdir)
    toxiproxy.start()
    try:
        topology = _state(workdir, toxiproxy, kind)
    except BaseException:
        toxiproxy.stop()
        raise
    try:
        redis, kafka = topology.redis, topology.kafka
        redis.start()
        kafka.start()
        kafka.create_topic(TOPIC, partitions=2)
        kafka.create_topic(DEAD_LETTER_TOPIC, partitions=1)
        kafka.create_topic(ORDERS, partitions=2)
        if isinstance(kafka, ProxiedKafkaBroker):
            toxiproxy.create_proxy("spark-kafka", kafka.spark_port, listen_port=kafka.proxy_port)
        nodes = redis.nodes if isinstance(redis, ReplicatedRedis) else [redis]
        for link in REDIS_LINKS:
            for proxy, node in zip(topology.links[link], nodes, strict=True):
                toxiproxy.create_proxy(proxy, node.port)
        for index in range(GATEWAYS):
            url, env = topology.redis_access(f"gw{index}-redis")
            gateway = GatewayProcess(workdir / "gateways", url, [STREAM, ORDERS, LARGE_ORDERS], *gateway_args, env=env,
                                     auth_secret=auth_secret)
            topology.gateways.append(gateway.start())
        topology.nginx = NginxBalancer(workdir / "nginx", [g.port for g in topology.gateways])
        topology.nginx.start()
        for index in range(EDGES):
            edge = f"edge-{index}"
            toxiproxy.create_proxy(edge, topology.nginx.port)
            topology.links[edge] = [edge]
    except BaseException:
        topology.stop()
        raise
    return topology
