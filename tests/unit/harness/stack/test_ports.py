"""free_port never hands out one port twice in a process, even when the OS offers it again."""

from __future__ import annotations

import socket

import pytest

from sparkwire_harness.stack import ports


def test_a_port_the_os_offers_again_is_not_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    offered = iter([41000, 41000, 41001])

    class Probe:
        def __init__(self, *args: object) -> None:
            self.port = next(offered)

        def __enter__(self) -> Probe:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def bind(self, address: tuple[str, int]) -> None:
            pass

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(ports, "_handed_out", set())
    monkeypatch.setattr(socket, "socket", Probe)
    assert ports.free_port() == 41000
    assert ports.free_port() == 41001  # 41000 offered again: skipped


def test_real_ports_are_distinct() -> None:
    picked = [ports.free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)
