"""A call on the release's Redis goes on through a lost connection (the forward re-opened) until its
timeout, then raises the last error."""

from __future__ import annotations

from typing import Any

import pytest
import redis as redis_lib

from sparkwire_harness.kind.redis_link import RedisLink
from sparkwire_harness.kind.settings import FULLNAME

from .conftest import FakeClock, FakeCore, fake_kube


class FakeForward:
    def __init__(self) -> None:
        self.alive = False
        self.local_port = 0
        self.starts = 0
        self.stops = 0

    def start(self) -> int:
        self.starts += 1
        self.alive, self.local_port = True, 40000 + self.starts
        return self.local_port

    def stop(self) -> None:
        self.stops += 1
        self.alive = False


class FakeRedis:
    def __init__(self, port: int, password: str, socket_timeout: float) -> None:
        self.port, self.password = port, password
        self.closed = False

    def close(self) -> None:
        self.closed = True


def link(forward: FakeForward) -> RedisLink:
    core = FakeCore(secrets={f"{FULLNAME}-redis": {"redis-password": "pw"}})
    return RedisLink(fake_kube(core), forward=forward, connect=FakeRedis)  # type: ignore[arg-type]


def test_a_lost_connection_reopens_the_forward_and_the_call_goes_on(clock: FakeClock) -> None:
    forward = FakeForward()
    attempts: list[tuple[int, str]] = []

    def action(client: Any) -> str:
        attempts.append((client.port, client.password))
        if len(attempts) < 3:
            raise redis_lib.ConnectionError("connection reset")
        return "done"

    assert link(forward).call(action) == "done"
    assert attempts == [(40001, "pw"), (40002, "pw"), (40003, "pw")]
    assert forward.stops == 2 and clock.slept == [2, 2]


def test_after_its_timeout_the_last_error_is_raised(clock: FakeClock) -> None:
    def action(_client: Any) -> None:
        raise redis_lib.TimeoutError("no answer")

    with pytest.raises(redis_lib.TimeoutError, match="no answer"):
        link(FakeForward()).call(action, timeout=10)
    assert clock.now > 10


def test_other_errors_are_not_retried(clock: FakeClock) -> None:
    def action(_client: Any) -> None:
        raise redis_lib.ResponseError("WRONGTYPE")

    with pytest.raises(redis_lib.ResponseError):
        link(FakeForward()).call(action)
    assert clock.slept == []
