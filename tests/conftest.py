"""Shared fixtures: one real Redis and one real Kafka broker per test session, on free ports."""

from __future__ import annotations

import gc
from collections.abc import Generator, Iterator
from pathlib import Path
from uuid import uuid4

import pytest
import redis as redis_lib
from hypothesis import HealthCheck, settings

from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import KafkaBroker, KafkaCluster, RedisServer

# Property tests check what is generated, not how fast: on a loaded 2-core machine (make test runs two
# pytest processes, CI may share the host) generation is slow now and then, and neither Hypothesis's
# too_slow health check nor its 200 ms deadline says anything about the code under test. Speed lives in bench/.
settings.register_profile("sparkwire", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("sparkwire")

# Servers started by this session, by the fixture name that started them (for failure reports).
_SERVERS: dict[str, RedisServer | KafkaBroker] = {}
# A test that uses any of these fixtures gets the servers' log tails in its failure report.
_SERVER_FIXTURES = {
    "redis_server": ("redis_server",),
    "redis": ("redis_server",),
    "kafka_broker": ("kafka_broker",),
}
_LOG_TAIL_LINES = 50


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    _SERVERS["redis_server"] = server
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    _SERVERS["kafka_broker"] = broker
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def redis(redis_server: RedisServer) -> Iterator[redis_lib.Redis]:
    """A bytes-in, bytes-out client of the session's Redis."""
    client = redis_server.client(decode_responses=False)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def toxiproxy(tmp_path: Path) -> Iterator[Toxiproxy]:
    """A toxiproxy server of its own (``make setup`` builds it), for faults on real links."""
    proxy = Toxiproxy(tmp_path / "toxiproxy")
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the test (after one full collection): what is still alive then
    is held by references or by cycles, not waiting for a collection."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture
def unique_name() -> str:
    """A fresh name for this test's streams, keys and topics."""
    return f"t{uuid4().hex[:10]}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On failure, append the log tails of the session servers the test used to its report."""
    report = yield
    if report.failed:
        fixtures = getattr(item, "fixturenames", ())
        for name in sorted({server for f in fixtures for server in _SERVER_FIXTURES.get(f, ())}):
            server = _SERVERS.get(name)
            if server is None:
                continue
            state = "running" if server.process.alive else f"exited ({server.process.returncode})"
            title = f"{name} log, last {_LOG_TAIL_LINES} lines ({state}, {server.process.log_path})"
            report.sections.append((title, server.log_tail(_LOG_TAIL_LINES)))
        # A test's own Kafka cluster (tests/integration/harness/stack): every node's log.
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, KafkaCluster):
                report.sections.append((f"{name}: Kafka node logs, last 40 lines each", value.log_tail(40)))
    return report
