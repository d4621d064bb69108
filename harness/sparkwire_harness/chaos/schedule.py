"""The fault schedule of a chaos run: which fault hits what, when and for how long — a pure function of the
seed and the run's length, so a failing run can be replayed exactly (``--seed``).

Faults are spread evenly over the fault window with jitter, in a seeded random order, so kinds mix and
overlap (a Redis failover during a blackhole, a driver kill while a gateway is paused) as they would in
production. Counts scale with the run's length; the default 10-minute run has every network fault on
every link class and at least 5 driver kills.

Redis and Kafka faults depend on the topology (``sparkwire_harness.chaos.topology``): on the replicated one,
``redis-failover`` (the primary SIGKILLed, or cut off from its replicas and sentinels while the gateways and
the driver still reach it) and ``kafka-leader`` (the broker leading the input's partition 0 SIGKILLed, or
cut off from the other brokers and the controllers while Spark still reaches it), half of each kind one
way, half the other; on the single one, ``redis-kill`` and ``kafka-restart`` (restarted in place).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass, field

from sparkwire_harness.chaos.views import METRIC_PROFILES

# Fault kind -> the category the final line counts it under.
CATEGORY = {
    "driver-kill": "driver",
    "gateway-kill": "gateway", "gateway-roll": "gateway", "gateway-pause": "gateway",
    "redis-kill": "redis", "redis-failover": "redis-failover",
    "kafka-restart": "kafka", "kafka-leader": "kafka-leader",
    "net": "net",
    "consumer-freeze": "client", "page-reload": "client",
}
# The categories the final line counts, per topology.
CATEGORIES = {
    "replicated": ("driver", "gateway", "redis-failover", "kafka-leader", "net", "client"),
    "single": ("driver", "gateway", "redis", "kafka", "net", "client"),
}

GATEWAYS = 3
EDGES = 2  # client-facing proxies in front of nginx; clients are spread over them
# Link class -> the proxies (toxiproxy names) of that class, and the toxics that make sense on it.
LINKS: dict[str, tuple[str, ...]] = {
    "client-nginx": tuple(f"edge-{i}" for i in range(EDGES)),
    "gateway-redis": tuple(f"gw{i}-redis" for i in range(GATEWAYS)),
    "spark-kafka": ("spark-kafka",),
    "spark-redis": ("spark-redis",),
}
TOXICS: dict[str, tuple[str, ...]] = {
    # "cut": the connection closes after a few KB, in the middle of a frame (clients dropping mid-frame).
    "client-nginx": ("latency", "blackhole", "reset", "slow", "cut"),
    "gateway-redis": ("latency", "blackhole", "reset", "slow"),
    "spark-kafka": ("latency", "blackhole", "reset", "slow"),
    "spark-redis": ("latency", "blackhole", "reset"),
}
# A cut-off Redis primary: longer than the sentinels' down-after (2 s) plus an election and a promotion.
REDIS_CUT_S = (8.0, 15.0)
# A crashed primary stays down this long (the failover happens meanwhile), then comes back as a replica.
REDIS_DOWN_S = (4.0, 10.0)
# A cut-off Kafka leader: longer than the brokers' session timeout, so the controllers fence it and move
# its partitions' leadership.
KAFKA_CUT_S = (10.0, 20.0)
KAFKA_DOWN_S = (3.0, 10.0)
# Longer than the gateway's pong timeout and the clients' silence timeout (run.py passes both), so a
# paused gateway is noticed by its clients, not merely sat out.
PAUSE_S = (20.0, 26.0)


@dataclass(frozen=True)
class Fault:
    at_s: float
    """Seconds after the start of the fault window."""
    kind: str
    target: str
    duration_s: float = 0.0
    """How long the fault lasts before it is healed (down time, blackhole length); 0: instantaneous."""
    toxic: str = ""
    params: tuple[tuple[str, int], ...] = ()
    index: int = 0

    @property
    def category(self) -> str:
        return CATEGORY[self.kind]

    @property
    def ends_s(self) -> float:
        return self.at_s + self.duration_s

    def describe(self) -> str:
        what = f"{self.kind} {self.target}"
        if self.toxic:
            what = f"net {self.toxic} {self.target}"
        params = ", ".join(f"{k}={v}" for k, v in self.params)
        lasting = f" for {self.duration_s:.1f}s" if self.duration_s else ""
        return f"#{self.index:<3} +{self.at_s:7.1f}s  {what}{lasting}{f' ({params})' if params else ''}"


@dataclass(frozen=True)
class ClientPlan:
    """One Python client: ``kind`` steady, slow (slow renderer, tiny socket buffer, in the process that
    consumer-freeze faults stop), cursor (leaves and comes back with its old cursor) or session (leaves,
    and comes back with its state and session id but no cursor)."""

    id: int
    kind: str
    edge: str
    absences: tuple[tuple[float, float], ...] = ()
    """(leave, return) in seconds after the start of the fault window."""
    profile: str = ""
    """A filtered or scoped client: the name of its ``views.METRIC_PROFILES`` profile; "" for every entry."""


@dataclass(frozen=True)
class Schedule:
    seed: int
    window_s: float
    faults: list[Fault]
    clients: list[ClientPlan] = field(default_factory=list)
    topology: str = "replicated"

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(CATEGORIES[self.topology], 0)
        for fault in self.faults:
            counts[fault.category] += 1
        return counts

    def describe(self) -> str:
        counts = ", ".join(f"{name} {n}" for name, n in self.counts().items())
        resumes = [c for c in self.clients if c.absences]
        lines = [f"fault schedule, seed {self.seed}, {self.topology} topology: {len(self.faults)} faults over "
                 f"{self.window_s:.0f}s ({counts})"]
        lines += [f"  {fault.describe()}" for fault in self.faults]
        kinds = {kind: sum(1 for c in self.clients if c.kind == kind)
                 for kind in ("steady", "slow", "cursor", "session")}
        lines.append(f"clients: {len(self.clients)} ({', '.join(f'{k} {n}' for k, n in kinds.items())}); "
                     f"{sum(len(c.absences) for c in resumes)} absences:")
        for client in resumes:
            spans = ", ".join(f"+{a:.1f}s..+{b:.1f}s" for a, b in client.absences)
            lines.append(f"  client {client.id:>3} ({client.kind}, {client.edge}) away {spans}")
        filtered = [c for c in self.clients if c.profile]
        lines.append(f"filtered and scoped clients: {len(filtered)}" + (": " if filtered else "")
                     + ", ".join(f"{c.id} ({c.kind}) {c.profile}" for c in filtered))
        return "\n".join(lines)


def _scaled(minutes: float, per_ten: float, floor: int) -> int:
    return max(floor, round(per_ten * minutes / 10))


def _net_faults(rng: random.Random, count: int) -> list[Fault]:
    combos = [(link, toxic) for link, toxics in TOXICS.items() for toxic in toxics]
    rng.shuffle(combos)
    if count >= len(combos):
        chosen = combos + [rng.choice(combos) for _ in range(count - len(combos))]
    else:  # cover every link class and every toxic at least once, then fill
        chosen, links, toxics = [], set(), set()
        for link, toxic in combos:
            if link not in links or toxic not in toxics:
                chosen.append((link, toxic))
                links.add(link)
                toxics.add(toxic)
        chosen += [c for c in combos if c not in chosen][: max(0, count - len(chosen))]
    return [_net_fault(rng, link, toxic) for link, toxic in chosen]


def _net_fault(rng: random.Random, link: str, toxic: str) -> Fault:
    target = rng.choice(LINKS[link])
    if toxic == "latency":
        params: tuple[tuple[str, int], ...] = (("latency", rng.randrange(200, 1500, 50)), ("jitter", 100))
        return Fault(0, "net", target, rng.uniform(10, 25), toxic, params)
    if toxic == "blackhole":
        # Client links past the silence timeout sometimes: then the client, not the heal, ends it.
        seconds = rng.uniform(8, 20) if link == "client-nginx" else rng.uniform(4, 12)
        return Fault(0, "net", target, seconds, toxic)
    if toxic == "reset":
        return Fault(0, "net", target, rng.uniform(1, 4), toxic)
    if toxic == "slow":
        return Fault(0, "net", target, rng.uniform(10, 20), toxic, (("rate", rng.randrange(2, 17)),))
    if toxic == "cut":
        return Fault(0, "net", target, rng.uniform(3, 8), toxic, (("bytes", rng.randrange(300, 6000)),))
    raise ValueError(f"unknown toxic {toxic!r}")


def _state_faults(rng: random.Random, minutes: float, topology: str) -> list[Fault]:
    """The faults of Redis and Kafka (module docstring)."""
    if topology == "single":
        faults = [Fault(0, "redis-kill", "redis", rng.uniform(1, 4)) for _ in range(_scaled(minutes, 2, 1))]
        # Every other one a crash (SIGKILL) rather than a clean restart.
        return faults + [Fault(0, "kafka-restart", "kafka", rng.uniform(1, 5), params=(("sigkill", int(i % 2 == 0)),))
                         for i in range(_scaled(minutes, 2, 1))]
    if topology != "replicated":
        raise ValueError(f"unknown topology {topology!r}")
    faults = []
    for kind, target, cut_s, down_s in (("redis-failover", "primary", REDIS_CUT_S, REDIS_DOWN_S),
                                        ("kafka-leader", "leader", KAFKA_CUT_S, KAFKA_DOWN_S)):
        for i in range(_scaled(minutes, 4, 2)):
            partition = i % 2  # a crash first, then a cut, and so on
            seconds = rng.uniform(*(cut_s if partition else down_s))
            faults.append(Fault(0, kind, target, seconds, params=(("partition", partition),)))
    return faults


def _process_faults(rng: random.Random, minutes: float, topology: str) -> list[Fault]:
    faults = [Fault(0, "driver-kill", "aggregator") for _ in range(_scaled(minutes, 6, 2))]
    faults += [Fault(0, "gateway-kill", f"gw{rng.randrange(GATEWAYS)}", rng.uniform(0.5, 3))
               for _ in range(_scaled(minutes, 8, 1))]
    faults += [Fault(0, "gateway-roll", "all") for _ in range(_scaled(minutes, 2, 1))]
    faults.append(Fault(0, "gateway-pause", f"gw{rng.randrange(GATEWAYS)}", rng.uniform(*PAUSE_S)))
    faults += _state_faults(rng, minutes, topology)
    faults += [Fault(0, "consumer-freeze", "slow-clients", rng.uniform(8, 20)) for _ in range(_scaled(minutes, 2, 1))]
    faults += [Fault(0, "page-reload", "page") for _ in range(_scaled(minutes, 2, 1))]
    return faults


def _clients(rng: random.Random, count: int, window_s: float) -> list[ClientPlan]:
    special = max(1, count // 20)
    kinds = ["slow"] * max(1, count // 25) + ["cursor"] * special + ["session"] * special
    kinds += ["steady"] * max(0, count - len(kinds))
    rng.shuffle(kinds)
    plans = []
    for index, kind in enumerate(kinds[:count]):
        absences: list[tuple[float, float]] = []
        if kind in ("cursor", "session"):
            low, high = (20.0, 90.0) if kind == "cursor" else (5.0, 40.0)
            at = rng.uniform(0, window_s / 3)
            for _ in range(rng.randint(1, 2)):
                away = min(rng.uniform(low, high), window_s / 4)
                if at + away > window_s - 5:
                    break
                absences.append((round(at, 1), round(at + away, 1)))
                at += away + rng.uniform(5, window_s / 3)
        plans.append(ClientPlan(index, kind, LINKS["client-nginx"][index % EDGES], tuple(absences)))
    return _with_profiles(plans)


def _with_profiles(plans: list[ClientPlan]) -> list[ClientPlan]:
    """One client in ten (at least one per profile) subscribes filtered or with a scoped token: the first
    ones those that leave and come back (cursor and session alternately), then a slow one, then steady ones
    spread over the ids; profiles taken in turn. No draw from the seed's generator: the faults and the
    clients' plans of a seed stay what they were."""
    if not plans:
        return plans
    by_kind = {kind: [p for p in plans if p.kind == kind] for kind in ("cursor", "session", "slow", "steady")}
    returning = [p for pair in itertools.zip_longest(by_kind["cursor"], by_kind["session"]) for p in pair if p]
    steady = by_kind["steady"]
    wanted = min(len(plans), max(len(METRIC_PROFILES), len(plans) // 10))
    picked = returning[:4] + by_kind["slow"][:1]
    stride = max(1, len(steady) // max(1, wanted - len(picked)))
    picked += steady[::stride]
    picked += [p for p in plans if p not in picked]
    names = {p.id: METRIC_PROFILES[i % len(METRIC_PROFILES)].name for i, p in enumerate(picked[:wanted])}
    return [dataclasses.replace(p, profile=names.get(p.id, "")) for p in plans]


def build_schedule(seed: int, minutes: float, clients: int = 200, topology: str = "replicated") -> Schedule:
    """The faults of a run of ``minutes`` (the fault window) on ``topology`` and the plans of ``clients``
    clients."""
    if minutes <= 0:
        raise ValueError("minutes must be > 0")
    rng = random.Random(seed)
    window_s = minutes * 60
    faults = _process_faults(rng, minutes, topology) + _net_faults(rng, _scaled(minutes, 36, 6))
    rng.shuffle(faults)
    # Evenly spread with jitter, ending early enough for the longest fault to heal inside the window.
    usable = window_s - 30
    slot = usable / len(faults)
    timed = []
    for index, fault in enumerate(faults):
        at = 5 + slot * (index + rng.uniform(0.1, 0.9))
        duration = min(fault.duration_s, window_s - at - 2)
        timed.append(Fault(round(at, 1), fault.kind, fault.target, round(duration, 1), fault.toxic, fault.params,
                           index + 1))
    return Schedule(seed, window_s, timed, _clients(rng, clients, window_s), topology)
