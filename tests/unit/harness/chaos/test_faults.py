"""A network fault whose injection fails part-way is still healed whole (chaos/faults.py, toxiproxy.py).

Seen in a chaos run: toxiproxy's API timed out adding the blackhole of ``spark-kafka``'s second broker proxy
while the first already had its toxic; nothing healed it, and the driver waited on that broker for the rest
of the run."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from sparkwire_harness.chaos import faults
from sparkwire_harness.chaos.faults import NetworkFault, Targets, apply
from sparkwire_harness.chaos.schedule import Fault
from sparkwire_harness.chaos.toxiproxy import Toxiproxy, ToxiproxyError, ToxiproxyRestarted, remove_all


class FakeToxiproxy:
    """Toxics per proxy; ``add_fault`` on ``fail_on`` adds its toxics, then times out (as a stalled API
    whose call went through)."""

    def __init__(self, fail_on: str = "") -> None:
        self.toxics: dict[str, set[str]] = {}
        self.fail_on = fail_on

    def add_fault(self, proxy: str, name: str, toxic: str, params: dict[str, int]) -> list[str]:
        names = [f"{name}-upstream", f"{name}-downstream"]
        self.toxics.setdefault(proxy, set()).update(names)
        if proxy == self.fail_on:
            raise TimeoutError("timed out")
        return names

    def remove(self, proxy: str, names: list[str]) -> None:
        self.toxics.get(proxy, set()).difference_update(names)

    def restart(self) -> None:
        raise AssertionError("no removal failed: no restart")


def targets_with(toxiproxy: FakeToxiproxy) -> Targets:
    links = {"spark-kafka": ["spark-kafka-b1", "spark-kafka-b2", "spark-kafka-b3"]}
    topology = SimpleNamespace(toxiproxy=toxiproxy, links=links)
    return Targets(topology=cast(Any, topology), aggregator=cast(Any, None), slow_clients=None)


def blackhole(index: int = 30) -> Fault:
    return Fault(at_s=0.0, kind="net", target="spark-kafka", duration_s=0.05, toxic="blackhole", index=index)


def test_a_failed_injection_is_reported_and_every_toxic_it_left_is_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(faults.INJECTORS, "net", NetworkFault())
    toxiproxy = FakeToxiproxy(fail_on="spark-kafka-b2")
    applied = apply(blackhole(), targets_with(toxiproxy), time.time(), threading.Event())
    assert applied.error.startswith("TimeoutError"), applied
    assert toxiproxy.toxics == {"spark-kafka-b1": set(), "spark-kafka-b2": set()}
    assert applied.ended_at >= applied.injected_at


def test_a_network_fault_is_healed_after_its_duration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(faults.INJECTORS, "net", NetworkFault())
    toxiproxy = FakeToxiproxy()
    applied = apply(blackhole(), targets_with(toxiproxy), time.time(), threading.Event())
    assert applied.error == ""
    assert all(not names for names in toxiproxy.toxics.values()) and len(toxiproxy.toxics) == 3


def test_a_removal_that_keeps_failing_restarts_toxiproxy_after_trying_every_proxy() -> None:
    removed: list[str] = []
    restarts: list[int] = []

    class Stalled:
        def remove(self, proxy: str, names: list[str]) -> None:
            if proxy == "a":
                raise ToxiproxyError("DELETE /proxies/a/toxics/x: 503 Timeout")
            removed.append(proxy)

        def restart(self) -> None:
            restarts.append(1)

    with pytest.raises(ToxiproxyRestarted, match="503 Timeout"):
        remove_all(cast(Toxiproxy, Stalled()), [("a", ["x"]), ("b", ["x"]), ("c", ["x"])])
    assert removed == ["b", "c"] and restarts == [1]


def test_removed_cleanly_no_restart() -> None:
    removed: list[tuple[str, list[str]]] = []

    class Fine:
        def remove(self, proxy: str, names: list[str]) -> None:
            removed.append((proxy, names))

        def restart(self) -> None:
            raise AssertionError("restarted")

    remove_all(cast(Toxiproxy, Fine()), [("a", ["x"]), ("b", ["y", "z"])])
    assert removed == [("a", ["x"]), ("b", ["y", "z"])]
