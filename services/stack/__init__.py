"""Real local servers (Redis, Kafka) as child processes, for the tests and the demo."""

from __future__ import annotations

from .kafka_broker import KafkaBroker
from .nginx import NginxBalancer as NginxBalancer
from .paths import (
    SetupMissingError,
    cache_dir,
    kafka_libs_dir,
    repo_root,
    spark_connector_jars,
)
from .ports import free_port
from .process import ManagedProcess, ProcessDiedError, ReadyTimeoutError
from .redis_server import RedisServer

__all__ = [
    "KafkaBroker",
    "ManagedProcess",
    "ProcessDiedError",
    "ReadyTimeoutError",
    "RedisServer",
    "SetupMissingError",
    "cache_dir",
    "free_port",
    "kafka_libs_dir",
    "repo_root",
    "spark_connector_jars",
]
