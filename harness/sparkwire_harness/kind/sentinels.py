"""The chart's replicated Redis (`redis.replication.enabled`: a primary and two replicas in one StatefulSet,
a Sentinel beside each) seen from inside its pods: what the Sentinels name as the primary, each data node's
role and replication state, their logs; and a Redis link that always reaches the current primary."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis as redis_lib

from .kube import Kube
from .objects import name, restarts
from .port_forward import PortForward
from .redis_link import RedisLink
from .settings import FULLNAME, NAMESPACE, REDIS_POD, REDIS_SELECTOR
from .tools import kubectl

MASTER_NAME = "sparkwire"  # the chart's redis.replication.masterName
PODS = [f"{FULLNAME}-redis-{i}" for i in range(3)]  # redis.replication.replicas 2: pods 0..2


def redis_cli(pod: str, *args: str, sentinel: bool = False, timeout: float = 15) -> str | None:
    """redis-cli inside ``pod`` (its `redis` container, which has the password in REDISCLI_AUTH; or its
    `sentinel` container, port 26379, no password); the raw reply, or None when the pod does not answer."""
    container, port = ("sentinel", "26379") if sentinel else ("redis", "6379")
    done = kubectl("exec", pod, "-c", container, "--", "redis-cli", "-h", "127.0.0.1", "-p", port, "--raw",
                   *args, timeout=timeout)
    if done.returncode != 0 or done.stdout.startswith(("ERR", "LOADING", "Could not connect")):
        return None
    return done.stdout


def pod_of(address: str) -> str:
    """A node's announced address, its pod's stable DNS name (<pod>.<headless>.<ns>.svc), -> the pod."""
    return address.split(".", 1)[0]


def sentinel_views(kube: Kube) -> dict[str, str]:
    """The primary each answering Sentinel names (pod -> pod)."""
    views: dict[str, str] = {}
    for pod in sorted(name(p) for p in kube.running(REDIS_SELECTOR)):
        reply = redis_cli(pod, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME, sentinel=True, timeout=8)
        if reply and reply.split():
            views[pod] = pod_of(reply.split()[0])
    return views


def majority(views: dict[str, str], quorum: int = 2) -> str | None:
    """The pod at least ``quorum`` Sentinels name (2 of 3), or None."""
    named = Counter(views.values()).most_common(1)
    return named[0][0] if named and named[0][1] >= quorum else None


def agreed_primary(kube: Kube) -> str | None:
    """The pod a majority of the Sentinels name as the primary, or None."""
    return majority(sentinel_views(kube))


def wait_agreed_primary(kube: Kube, timeout: float, unlike: str | None = None) -> str:
    deadline = time.monotonic() + timeout
    while True:
        primary = agreed_primary(kube)
        if primary is not None and primary != unlike:
            return primary
        if time.monotonic() > deadline:
            raise AssertionError(f"no Sentinel majority naming a primary{f' other than {unlike}' if unlike else ''} "
                                 f"within {timeout}s: {sentinel_views(kube)}; {redis_logs(kube)}")
        time.sleep(2)


def role(pod: str) -> str | None:
    """ROLE of the data node in ``pod``: master, slave, or None (not answering)."""
    reply = redis_cli(pod, "ROLE", timeout=8)
    return reply.split()[0] if reply and reply.split() else None


def parse_info(reply: str) -> dict[str, str]:
    """An INFO section's `field:value` lines."""
    return dict(line.strip().split(":", 1) for line in reply.splitlines() if ":" in line)


def replication(pod: str) -> dict[str, str]:
    return parse_info(redis_cli(pod, "INFO", "replication", timeout=8) or "")


def replicas_caught_up(info: dict[str, str], replicas: int = 2) -> bool:
    """Whether a primary's INFO replication lists ``replicas`` replicas, each online at its
    master_repl_offset."""
    offset = info.get("master_repl_offset")
    listed = [v for k, v in info.items() if re.fullmatch(r"slave\d+", k)]
    return bool(offset) and len(listed) == replicas and all(
        "state=online" in r and f"offset={offset}," in r + "," for r in listed)


def wait_replicas_caught_up(primary: str, timeout: float = 120) -> dict[str, str]:
    """Until every replica the primary lists is online at its master_repl_offset (nothing is being written:
    no producer runs); the primary's INFO replication."""
    deadline = time.monotonic() + timeout
    info: dict[str, str] = {}
    while time.monotonic() < deadline:
        info = replication(primary)
        if replicas_caught_up(info):
            return info
        time.sleep(2)
    raise AssertionError(f"the replicas of {primary} did not catch up within {timeout}s: {info}")


def redis_logs(kube: Kube, lines: int = 25) -> str:
    """The last lines of every Redis pod's containers, for a failure message."""
    out = []
    for pod in sorted(name(p) for p in kube.pods(REDIS_SELECTOR)):
        for container in ("redis", "sentinel"):
            done = kubectl("logs", pod, "-c", container, f"--tail={lines}", timeout=20)
            out.append(f"--- {pod}/{container}:\n{done.stdout}{done.stderr}")
    return "\n".join(out)


def redis_restarts(kube: Kube, pod: str) -> int:
    """Restarts of the pod's `redis` container."""
    return restarts(kube.core.read_namespaced_pod(pod, NAMESPACE), "redis")


class PrimaryForward(PortForward):
    """A port-forward to the pod the Sentinels name as the primary, chosen again at every (re)start."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(f"pod/{REDIS_POD}", 6379)
        self.kube = kube

    def start(self, timeout: float = 30) -> int:
        self.target = f"pod/{wait_agreed_primary(self.kube, timeout=120)}"
        return super().start(timeout)


def role_name(reply: Any) -> str:
    """The role in a ROLE reply (its first element, bytes or str)."""
    first = reply[0]
    return first.decode() if isinstance(first, bytes) else str(first)


class PrimaryLink(RedisLink):
    """A RedisLink (retries, re-opened port-forward) always on the primary: a call that finds itself on a
    replica (a failover moved the primary) drops the forward and goes to the new one, so what the checks
    read is what the writer wrote, never a replica's possibly older copy."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube, PrimaryForward(kube))

    def call(self, action: Callable[[redis_lib.Redis], Any], timeout: float = 240) -> Any:
        def on_primary(r: redis_lib.Redis) -> Any:
            found = role_name(r.execute_command("ROLE"))  # type: ignore[no-untyped-call]
            if found != "master":
                raise redis_lib.ConnectionError(f"{self.forward.target} is a {found} now")
            return action(r)

        return super().call(on_primary, timeout)
