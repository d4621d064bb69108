"""free_port never hands out one port twice in a process, skips ports someone listens on, and gives each of
make test's pytest runs (SPARKWIRE_PORT_BLOCK) or xdist workers a block of its own."""

from __future__ import annotations

import socket

import pytest

from sparkwire_harness.stack import ports


def test_a_port_is_not_handed_out_twice_in_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_handed_out", set())
    monkeypatch.setattr(ports, "_block", lambda: range(41000, 41003))
    # Bindable or not is the next test's: these ports lie in the kernel's ephemeral range, where any outgoing
    # connection of the machine may hold one (it failed so in CI once).
    monkeypatch.setattr(ports, "_bindable", lambda port: True)
    picked = {ports.free_port() for _ in range(3)}
    assert picked == {41000, 41001, 41002}
    with pytest.raises(RuntimeError, match="no free port in 41000-41002"):
        ports.free_port()


def test_a_port_someone_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    real_bindable = ports._bindable
    checked: list[int] = []

    def bindable(port: int) -> bool:
        # The real check for the port listened on; the one after it counts as free. It lies in the kernel's
        # ephemeral range, where another process's connection may hold it (make test's lanes run beside
        # this: it failed so once).
        checked.append(port)
        return real_bindable(port) if port == busy else True

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        busy = listener.getsockname()[1]
        monkeypatch.setattr(ports, "_handed_out", set())
        monkeypatch.setattr(ports, "_block", lambda: range(busy, busy + 2))
        monkeypatch.setattr(ports, "_bindable", bindable)
        monkeypatch.setattr(ports.random, "randrange", lambda n: 0)  # the port listened on is tried first
        assert ports.free_port() == busy + 1
        assert checked == [busy, busy + 1]


def test_each_named_block_is_its_own_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    blocks = {}
    for index in ("0", "1", "2", "3"):
        monkeypatch.setenv("SPARKWIRE_PORT_BLOCK", index)
        blocks[index] = set(ports._block())
    monkeypatch.delenv("SPARKWIRE_PORT_BLOCK")
    assert set(ports._block()) == blocks["0"]  # neither named: the first block
    assert all(max(block) < 32768 for block in blocks.values())  # Linux's ephemeral range starts there
    assert all(blocks[a].isdisjoint(blocks[b]) for a in blocks for b in blocks if a < b)


def test_each_xdist_worker_draws_from_its_own_block_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPARKWIRE_PORT_BLOCK", raising=False)
    blocks = {}
    for worker in ("gw0", "gw1", "gw2", "gw3"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        blocks[worker] = set(ports._block())
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert set(ports._block()) == blocks["gw0"]  # a serial run: the first block
    assert all(max(block) < 32768 for block in blocks.values())  # Linux's ephemeral range starts there
    assert all(blocks[a].isdisjoint(blocks[b]) for a in blocks for b in blocks if a < b)


def test_real_ports_are_distinct() -> None:
    picked = [ports.free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)
