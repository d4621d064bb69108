"""Fault injectors, one per kind of fault in the schedule: ``inject`` starts the fault, ``heal`` ends it
(nothing to do for a kill: the supervisor or the restart is the recovery).

Faults on the same process are serialised by a lock per target (a gateway cannot be restarted by a kill
while a roll restarts it too); everything else overlaps freely.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from sparkwire.chaos.pipeline import SupervisedAggregator
from sparkwire.chaos.schedule import Fault
from sparkwire.chaos.topology import Topology
from sparkwire.stack import GatewayProcess, ManagedProcess

# Kinds whose recovery is measured from the moment they hit (a restart is part of recovering); the
# others from their heal.
SUDDEN = {"driver-kill", "gateway-kill", "gateway-roll", "redis-kill", "kafka-restart", "page-reload"}


@dataclass
class Targets:
    topology: Topology
    aggregator: SupervisedAggregator
    slow_clients: ManagedProcess | None
    other_drivers: list[SupervisedAggregator] = field(default_factory=list)
    """Drivers of other jobs (the orders example): a driver kill hits every driver."""
    locks: defaultdict[str, threading.Lock] = field(default_factory=lambda: defaultdict(threading.Lock))

    def gateway(self, name: str) -> GatewayProcess:
        return self.topology.gateways[int(name.removeprefix("gw"))]


class Injector(Protocol):
    def inject(self, fault: Fault, targets: Targets) -> None: ...

    def heal(self, fault: Fault, targets: Targets) -> None: ...


def _signal_group(process: ManagedProcess, signum: int) -> None:
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)


class DriverKill:
    def inject(self, fault: Fault, targets: Targets) -> None:
        for driver in [targets.aggregator, *targets.other_drivers]:
            driver.kill()  # the Python driver and its JVM; restarted on its checkpoint at once

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


class GatewayKill:
    def inject(self, fault: Fault, targets: Targets) -> None:
        with targets.locks[fault.target]:
            gateway = targets.gateway(fault.target)
            gateway.process.kill()
            time.sleep(fault.duration_s)
            gateway.start()

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


class GatewayRoll:
    """SIGTERM each gateway in turn (drain: clients are closed with 1001), restart it, wait until ready."""

    def inject(self, fault: Fault, targets: Targets) -> None:
        for index, gateway in enumerate(targets.topology.gateways):
            with targets.locks[f"gw{index}"]:
                gateway.process.stop(timeout=15)
                gateway.start()

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


class GatewayPause:
    """SIGSTOP: a hung pod whose sockets stay open; its clients must notice the silence themselves."""

    def inject(self, fault: Fault, targets: Targets) -> None:
        targets.locks[fault.target].acquire()
        _signal_group(targets.gateway(fault.target).process, signal.SIGSTOP)

    def heal(self, fault: Fault, targets: Targets) -> None:
        _signal_group(targets.gateway(fault.target).process, signal.SIGCONT)
        targets.locks[fault.target].release()


class RedisKill:
    """SIGKILL with gateways and clients connected; restarted on the same port from its AOF."""

    def inject(self, fault: Fault, targets: Targets) -> None:
        with targets.locks["redis"]:
            targets.topology.redis.kill()
            time.sleep(fault.duration_s)
            targets.topology.redis.start()

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


class KafkaRestart:
    def inject(self, fault: Fault, targets: Targets) -> None:
        kafka = targets.topology.kafka
        with targets.locks["kafka"]:
            if dict(fault.params).get("sigkill"):
                kafka.kill()
            else:
                kafka.stop()
            time.sleep(fault.duration_s)
            kafka.start()

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


class NetworkFault:
    """A toxic on one toxiproxy proxy for the fault's duration (``toxiproxy.FAULT_TOXICS``)."""

    def __init__(self) -> None:
        self._toxics: dict[int, list[str]] = {}

    def inject(self, fault: Fault, targets: Targets) -> None:
        self._toxics[fault.index] = targets.topology.toxiproxy.add_fault(
            fault.target, f"fault{fault.index}", fault.toxic, dict(fault.params))

    def heal(self, fault: Fault, targets: Targets) -> None:
        targets.topology.toxiproxy.remove(fault.target, self._toxics.pop(fault.index, []))


class ConsumerFreeze:
    """SIGSTOP the process of the slow clients: consumers that stop reading, as a frozen tab does."""

    def inject(self, fault: Fault, targets: Targets) -> None:
        if targets.slow_clients is not None:
            _signal_group(targets.slow_clients, signal.SIGSTOP)

    def heal(self, fault: Fault, targets: Targets) -> None:
        if targets.slow_clients is not None:
            _signal_group(targets.slow_clients, signal.SIGCONT)


class ByTheClients:
    """Done by the client processes themselves at the scheduled time (the page reloads)."""

    def inject(self, fault: Fault, targets: Targets) -> None:
        pass

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


INJECTORS: dict[str, Injector] = {
    "driver-kill": DriverKill(), "gateway-kill": GatewayKill(), "gateway-roll": GatewayRoll(),
    "gateway-pause": GatewayPause(), "redis-kill": RedisKill(), "kafka-restart": KafkaRestart(),
    "net": NetworkFault(), "consumer-freeze": ConsumerFreeze(), "page-reload": ByTheClients(),
}


@dataclass
class Applied:
    fault: Fault
    injected_at: float
    ended_at: float = 0.0
    """When recovery starts being measured: the hit for sudden faults, the heal for lasting ones."""
    error: str = ""


def apply(fault: Fault, targets: Targets, t0: float, stop: threading.Event) -> Applied:
    """Wait for the fault's time, inject it, heal it after its duration (or at once when ``stop`` is set)."""
    stop.wait(max(0.0, t0 + fault.at_s - time.time()))
    injector = INJECTORS[fault.kind]
    applied = Applied(fault, time.time())
    if stop.is_set():
        applied.error = "not injected: the run was stopped"
        return applied
    try:
        injector.inject(fault, targets)
        if fault.kind in SUDDEN:
            applied.ended_at = applied.injected_at
        else:
            stop.wait(fault.duration_s)
            injector.heal(fault, targets)
            applied.ended_at = time.time()
    except Exception as error:  # reported with the run; the rest of the schedule goes on
        applied.error = f"{type(error).__name__}: {error}"
        applied.ended_at = time.time()
    return applied
