"""The processes and links of a chaos run, all real and local: toxiproxy, Redis (AOF), a Kafka broker,
three gateways behind nginx — and a toxiproxy proxy on every link the schedule breaks:

    clients ──edge-0/1──► nginx ──► gateway i ──gw<i>-redis──► Redis ◄──spark-redis── Spark driver
                                                                       Kafka ◄──spark-kafka──┘
The producer writes to Kafka directly: its own retries are not what the run checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sparkwire.chaos.schedule import EDGES, GATEWAYS, LINKS
from sparkwire.chaos.toxiproxy import Toxiproxy
from sparkwire.stack import GatewayProcess, KafkaBroker, NginxBalancer, RedisServer, free_port

STREAM = "metrics"
TOPIC = "metrics-raw"
DEAD_LETTER_TOPIC = "metrics-deadletter"
ORDERS = "orders"  # the orders example's stream and topic (sparkwire.chaos.orders)


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
    redis: RedisServer
    kafka: ProxiedKafkaBroker
    gateways: list[GatewayProcess] = field(default_factory=list)
    nginx: NginxBalancer | None = None

    def proxy_port(self, name: str) -> int:
        return self.toxiproxy.listen_ports[name]

    def redis_url_via(self, proxy: str) -> str:
        return f"redis://127.0.0.1:{self.proxy_port(proxy)}/0"

    def edge_url(self, edge: str) -> str:
        return f"http://127.0.0.1:{self.proxy_port(edge)}"

    def edge_ws(self, edge: str, stream: str = STREAM) -> str:
        return f"ws://127.0.0.1:{self.proxy_port(edge)}/ws?stream={stream}"

    @property
    def direct_redis_url(self) -> str:
        return self.redis.url

    def stop(self) -> None:
        for step in ([self.nginx.stop] if self.nginx else []) + [g.stop for g in self.gateways] + [
                self.kafka.stop, self.redis.stop, self.toxiproxy.stop]:
            try:
                step()
            except Exception as error:  # keep stopping the rest: nothing may be left running
                print(f"[chaos] stopping: {error!r}", flush=True)


def start_topology(workdir: Path, auth_secret: str, gateway_args: list[str]) -> Topology:
    """Everything but the aggregator, the producer and the clients, ready to serve; ``stop()`` on failure
    is the caller's (it holds the result only once this returns)."""
    toxiproxy = Toxiproxy(workdir)
    toxiproxy.start()
    redis = RedisServer(workdir / "redis")
    kafka = ProxiedKafkaBroker(workdir / "kafka", proxy_port=free_port())
    topology = Topology(workdir, toxiproxy, redis, kafka)
    try:
        redis.start()
        kafka.start()
        kafka.create_topic(TOPIC, partitions=2)
        kafka.create_topic(DEAD_LETTER_TOPIC, partitions=1)
        kafka.create_topic(ORDERS, partitions=2)
        toxiproxy.create_proxy("spark-kafka", kafka.spark_port, listen_port=kafka.proxy_port)
        toxiproxy.create_proxy("spark-redis", redis.port)
        for proxy in LINKS["gateway-redis"]:
            toxiproxy.create_proxy(proxy, redis.port)
        for index in range(GATEWAYS):
            gateway = GatewayProcess(workdir / "gateways", topology.redis_url_via(f"gw{index}-redis"), [STREAM, ORDERS],
                                     *gateway_args, auth_secret=auth_secret)
            topology.gateways.append(gateway.start())
        topology.nginx = NginxBalancer(workdir / "nginx", [g.port for g in topology.gateways])
        topology.nginx.start()
        for index in range(EDGES):
            toxiproxy.create_proxy(f"edge-{index}", topology.nginx.port)
    except BaseException:
        topology.stop()
        raise
    return topology
