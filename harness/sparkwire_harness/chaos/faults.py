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

from sparkwire_harness.chaos.pipeline import SupervisedAggregator
from sparkwire_harness.chaos.schedule import Fault
from sparkwire_harness.chaos.topology import TOPIC, Topology
from sparkwire_harness.chaos.toxiproxy import remove_all, toxic_names
from sparkwire_harness.stack import GatewayProcess, KafkaCluster, ManagedProcess, ReplicatedRedis

# Kinds whose recovery is measured from the moment they hit (a restart, a failover is part of recovering);
# the others from their heal.
SUDDEN = {"driver-kill", "gateway-kill", "gateway-roll", "redis-kill", "kafka-restart", "page-reload",
          "redis-failover", "kafka-leader"}
# A failover takes a few seconds here (docs/replay-log.md); far longer means it did not happen.
FAILOVER_TIMEOUT_S = 60.0
# A killed broker's way back (a JVM start, its log's recovery, catching up into every ISR) took 62 s in a run
# where three Spark drivers restarted at the same moment on two cores: the fault had happened, only its
# recovery was slow, and the run counted it "not applied". Recovery is still awaited, just longer.
KAFKA_REJOIN_TIMEOUT_S = 120.0


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
        redis = targets.topology.redis
        if isinstance(redis, ReplicatedRedis):
            raise TypeError("redis-kill is the single topology's; the replicated one has redis-failover")
        with targets.locks["redis"]:
            redis.kill()
            time.sleep(fault.duration_s)
            redis.start()

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


def _cut(topology: Topology, proxies: list[str], name: str, seconds: float) -> None:
    """Blackhole ``proxies`` for ``seconds``, then heal them (whatever happens meanwhile)."""
    cut = [(proxy, toxic_names(name, "blackhole")) for proxy in proxies]
    try:
        for proxy in proxies:
            topology.toxiproxy.add_fault(proxy, name, "blackhole", {})
        time.sleep(seconds)
    finally:
        remove_all(topology.toxiproxy, cut)


class RedisFailover:
    """The primary SIGKILLed (down ``duration_s``, then back as a replica of the new primary), or cut off from
    its replicas and the sentinels for ``duration_s`` while the gateways and the driver still reach it (the
    sentinels promote a replica; after the heal they make the old primary a replica). Either way a failover
    must happen, and the old primary must be back in sync before the next Redis fault."""

    def inject(self, fault: Fault, targets: Targets) -> None:
        redis = targets.topology.redis
        if not isinstance(redis, ReplicatedRedis):
            raise TypeError("redis-failover needs the replicated topology")
        with targets.locks["redis"]:
            old = redis.primary()
            if dict(fault.params).get("partition"):
                _cut(targets.topology, [redis.link(old)], f"fault{fault.index}", fault.duration_s)
                redis.wait_for_failover(old, FAILOVER_TIMEOUT_S)
                redis.wait_rejoined(old, FAILOVER_TIMEOUT_S)  # the sentinels reconfigure it by themselves
            else:
                started = time.monotonic()
                old.kill()
                redis.wait_for_failover(old, FAILOVER_TIMEOUT_S)
                time.sleep(max(0.0, fault.duration_s - (time.monotonic() - started)))
                redis.restart(old, timeout=FAILOVER_TIMEOUT_S)  # as a replica of the new primary

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


class KafkaLeader:
    """The broker leading partition 0 of the input topic SIGKILLed (down ``duration_s``, then restarted from its
    data), or cut off from the other brokers and the controllers for ``duration_s`` while Spark and the
    producer still reach it (the controllers fence it and elect a new leader from the in-sync replicas)."""

    def inject(self, fault: Fault, targets: Targets) -> None:
        kafka = targets.topology.kafka
        if not isinstance(kafka, KafkaCluster):
            raise TypeError("kafka-leader needs the replicated topology")
        with targets.locks["kafka"]:
            leader = kafka.leader_of(TOPIC, 0)
            if dict(fault.params).get("partition"):
                _cut(targets.topology, kafka.partition_links(leader.node_id), f"fault{fault.index}", fault.duration_s)
                kafka.wait_in_sync(leader.node_id, KAFKA_REJOIN_TIMEOUT_S)
            else:
                leader.kill()
                time.sleep(fault.duration_s)
                kafka.restart_node(leader.node_id, timeout=KAFKA_REJOIN_TIMEOUT_S)

    def heal(self, fault: Fault, targets: Targets) -> None:
        pass


class KafkaRestart:
    def inject(self, fault: Fault, targets: Targets) -> None:
        kafka = targets.topology.kafka
        if isinstance(kafka, KafkaCluster):
            raise TypeError("kafka-restart is the single topology's; the replicated one has kafka-leader")
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
    """A toxic on every proxy of one link for the fault's duration (``toxiproxy.FAULT_TOXICS``)."""

    def __init__(self) -> None:
        self._toxics: dict[int, list[tuple[str, list[str]]]] = {}

    def inject(self, fault: Fault, targets: Targets) -> None:
        toxiproxy = targets.topology.toxiproxy
        name = f"fault{fault.index}"
        proxies = targets.topology.links[fault.target]
        # Named before they are added, so heal removes every one even when an add timed out (toxiproxy may
        # still have added it) or a later proxy's add failed.
        self._toxics[fault.index] = [(proxy, toxic_names(name, fault.toxic)) for proxy in proxies]
        for proxy in proxies:
            toxiproxy.add_fault(proxy, name, fault.toxic, dict(fault.params))

    def heal(self, fault: Fault, targets: Targets) -> None:
        remove_all(targets.topology.toxiproxy, self._toxics.pop(fault.index, []))


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
    "redis-failover": RedisFailover(), "kafka-leader": KafkaLeader(),
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
        try:
            injector.inject(fault, targets)
            if fault.kind in SUDDEN:
                applied.ended_at = applied.injected_at
            else:
                stop.wait(fault.duration_s)
        finally:
            # Healed even when the injection failed part-way (a toxiproxy call that timed out after two of
            # three proxies got their toxic): a fault never healed outlives its schedule and the run.
            if fault.kind not in SUDDEN:
                injector.heal(fault, targets)
                applied.ended_at = time.time()
    except Exception as error:  # reported with the run; the rest of the schedule goes on
        applied.error = f"{type(error).__name__}: {error}"
        applied.ended_at = time.time()
    return applied
