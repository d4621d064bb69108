"""The port kubectl says it forwards from, and a port-forward that never says so failing with what it said."""

from __future__ import annotations

from typing import Any

import pytest

from sparkwire_harness.kind import port_forward
from sparkwire_harness.kind.port_forward import PortForward, forwarded_port


def test_the_local_port_is_read_from_kubectls_line() -> None:
    assert forwarded_port("Forwarding from 127.0.0.1:40123 -> 6379\n") == 40123
    assert forwarded_port("Forwarding from [::1]:40123 -> 6379") is None
    assert forwarded_port("error: unable to forward port") is None


class FakeProcess:
    def __init__(self, lines: list[str], exited: bool) -> None:
        self.stdout = iter(lines)
        self.exited = exited
        self.terminated = False

    def poll(self) -> int | None:
        return 1 if self.exited or self.terminated else None

    def terminate(self) -> None:
        self.terminated = True

    def wait(self, timeout: float) -> int:
        return 0

    def kill(self) -> None:
        raise AssertionError("terminate was enough")


def popen_of(process: FakeProcess, seen: list[list[str]]) -> Any:
    def popen(command: list[str], **_kwargs: Any) -> FakeProcess:
        seen.append(command)
        return process
    return popen


def test_start_returns_the_forwarded_port_and_stop_ends_kubectl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(port_forward, "kubectl_command", lambda *args: ["kubectl", *args])
    process, commands = FakeProcess(["Forwarding from 127.0.0.1:40999 -> 6379\n"], exited=False), []
    forward = PortForward("pod/redis-0", 6379, popen=popen_of(process, commands))
    assert forward.start(timeout=5) == 40999 == forward.local_port and forward.alive
    assert commands == [["kubectl", "port-forward", "--address", "127.0.0.1", "pod/redis-0", ":6379"]]
    forward.stop()
    assert process.terminated and not forward.alive


def test_a_kubectl_that_exits_without_forwarding_fails_with_its_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(port_forward, "kubectl_command", lambda *args: ["kubectl", *args])
    process = FakeProcess(['error: pods "redis-0" not found\n'], exited=True)
    forward = PortForward("pod/redis-0", 6379, popen=popen_of(process, []))
    with pytest.raises(AssertionError, match=r"did not start: \['error: pods \"redis-0\" not found'\]"):
        forward.start(timeout=5)
