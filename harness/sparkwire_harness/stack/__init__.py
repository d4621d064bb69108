"""Real local servers (Redis, Kafka, nginx, gateways) as child processes, for the tests, the demo and the
benchmarks."""

from __future__ import annotations

from sparkwire.paths import cache_dir, repo_root

from .committer import Committer
from .gateway_process import GatewayProcess, MetricNotFoundError, http_status, metric_value
from .kafka_broker import KafkaBroker
from .kafka_cluster import KafkaCluster, KafkaNode
from .nginx import NginxBalancer as NginxBalancer
from .paths import SetupMissingError, kafka_libs_dir, spark_connector_jars
from .ports import free_port
from .process import ManagedProcess, ProcessDiedError, ReadyTimeoutError, exit_on_sigterm
from .redis_sentinel import ReplicatedRedis, SentinelServer
from .redis_server import RedisServer

__all__ = [
    "Committer",
    "GatewayProcess",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaNode",
    "ManagedProcess",
    "MetricNotFoundError",
    "ProcessDiedError",
    "ReadyTimeoutError",
    "RedisServer",
    "ReplicatedRedis",
    "SentinelServer",
    "SetupMissingError",
    "cache_dir",
    "exit_on_sigterm",
    "free_port",
    "http_status",
    "kafka_libs_dir",
    "metric_value",
    "repo_root",
    "spark_connector_jars",
]
