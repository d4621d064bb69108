"""The replicated Redis's start scripts (charts/sparkwire/files/redis/, rendered into the ConfigMap) run here
as the pods run them, against real ``redis-server`` and Sentinel processes: three "pods" on 127.0.0.2-4 (a
pod's stable DNS name stands in as its own loopback address, the same ports on each), each a data node and
a Sentinel started by the chart's scripts with the chart's redis.conf. What a cluster would add (DNS
names, volumes, restarts by the kubelet) is not here; the decisions the scripts take are.

- a first install: pod 0 becomes the primary, the others its replicas, every Sentinel names pod 0;
- the primary's pod is lost (data node and Sentinel SIGKILLed): the other two Sentinels fail over, and the
  restarted pod comes back as a replica of the new primary (not a second primary), with the data;
- every pod restarted at once: the Sentinels' config files on the volumes keep the primary;
- a primary restarted with an empty volume while the replicas hold data refuses to start as primary."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from sparkwire_harness.stack.ports import free_port
from sparkwire_harness.stack.process import ManagedProcess

from .conftest import FULLNAME, find, render

PASSWORD = "Zx81QwErTy0123456789abcdefABCDEF"
MASTER = "sparkwire"
HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
DOWN_AFTER_MS = 2_000


def _binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin")
    if found is None:
        pytest.fail(f"{name} not found: run `make setup` (it apt-installs redis-server)", pytrace=False)
    return found


class Pod:
    """One pod of the replicated StatefulSet: `redis` and `sentinel`, each run by the chart's script."""

    def __init__(self, ordinal: int, root: Path, files: dict[str, str], ports: tuple[int, int]) -> None:
        self.ordinal = ordinal
        self.host = HOSTS[ordinal]
        self.redis_port, self.sentinel_port = ports
        self.dir = root / f"pod-{ordinal}"
        self.data = self.dir / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        conf = "\n" + files["redis.conf"]
        assert "\ndir /data\n" in conf and "\nport 6379\n" in conf and "\nbind * -::*\n" in conf
        conf = (conf.replace("\ndir /data\n", f"\ndir {self.data}\n")
                .replace("\nport 6379\n", f"\nport {self.redis_port}\n")
                .replace("\nbind * -::*\n", f"\nbind {self.host}\n"))
        (self.dir / "redis.conf").write_text(conf)
        for script in ("start-redis.sh", "start-sentinel.sh"):
            (self.dir / script).write_text(files[script])
        env = {
            "POD_NAME": f"{FULLNAME}-redis-{ordinal}", "REDIS_NODES": " ".join(HOSTS), "MASTER_NAME": MASTER,
            "REDIS_PORT": str(self.redis_port), "SENTINEL_PORT": str(self.sentinel_port),
            "REDIS_PASSWORD": PASSWORD, "REDIS_SERVER": _binary("redis-server"),
        }
        path = f"{Path(_binary('redis-cli')).parent}:{os.environ['PATH']}"
        self.redis = ManagedProcess(f"redis-{ordinal}", ["sh", str(self.dir / "start-redis.sh")], self.dir, env={
            **env, "PATH": path, "REDISCLI_AUTH": PASSWORD, "REDIS_CONF": str(self.dir / "redis.conf"),
            "REDIS_DATA_DIR": str(self.data), "DISCOVERY_SECONDS": "3"})
        self.sentinel = ManagedProcess(f"sentinel-{ordinal}", ["sh", str(self.dir / "start-sentinel.sh")], self.dir,
                                       env={**env, "PATH": path, "QUORUM": "2", "DOWN_AFTER_MS": str(DOWN_AFTER_MS),
                                            "FAILOVER_TIMEOUT_MS": "4000", "PARALLEL_SYNCS": "2",
                                            "SENTINEL_DIR": str(self.data / "sentinel"), "SENTINEL_BIND": self.host})

    def start(self) -> None:
        self.sentinel.start()
        self.redis.start()

    def kill(self) -> None:
        self.redis.kill()
        self.sentinel.kill()

    def client(self) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.redis_port, password=PASSWORD, socket_timeout=1,
                           decode_responses=True)

    def role(self) -> tuple[str, str | None]:
        """('master', None) or ('slave', the primary's host with the link up, else None)."""
        try:
            with self.client() as client:
                info = client.info("replication")
        except (redis.RedisError, OSError):
            return ("down", None)
        if info["role"] == "master":
            return ("master", None)
        return ("slave", info["master_host"] if info.get("master_link_status") == "up" else None)

    def named_primary(self) -> str | None:
        try:
            with redis.Redis(host=self.host, port=self.sentinel_port, socket_timeout=1,
                             decode_responses=True) as sentinel:
                reply = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
        except (redis.RedisError, OSError):
            return None
        return str(reply[0]) if reply else None

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail(30)}" for p in (self.redis, self.sentinel))


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[list[Pod]]:
    objects = render(sets={"redis.replication.enabled": True})
    files = find(objects, "ConfigMap", f"{FULLNAME}-redis")["data"]
    ports = (free_port(), free_port())
    out = [Pod(i, tmp_path, files, ports) for i in range(3)]
    try:
        yield out
    finally:
        for pod in out:
            pod.kill()


def _wait(condition: Callable[[], bool], what: str, pods: list[Pod], timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in time:\n" + "\n".join(p.logs() for p in pods))
        time.sleep(0.2)


def _settled(pods: list[Pod], primary: Pod) -> bool:
    """`primary` is the only primary, every other node replicates it with the link up, every running
    Sentinel names it and sees the two replicas."""
    if primary.role()[0] != "master":
        return False
    if any(p.role() != ("slave", primary.host) for p in pods if p is not primary):
        return False
    for pod in pods:
        if not pod.sentinel.alive:
            continue
        if pod.named_primary() != primary.host:
            return False
        with redis.Redis(host=pod.host, port=pod.sentinel_port, socket_timeout=1, decode_responses=True) as s:
            state = s.execute_command("SENTINEL", "MASTER", MASTER)
            state = state if isinstance(state, dict) else dict(zip(state[::2], state[1::2], strict=True))
        if int(state["num-slaves"]) != 2 or int(state["num-other-sentinels"]) != 2:
            return False
    return True


def _write(primary: Pod, key: str) -> None:
    with primary.client() as client:
        client.set(key, "v")
        assert client.wait(1, 5000) >= 1


def _has(pod: Pod, key: str) -> bool:
    with pod.client() as client:
        return client.get(key) == "v"


def _named_by_majority(pods: list[Pod]) -> Pod | None:
    named = [p.named_primary() for p in pods if p.sentinel.alive]
    counts = Counter(n for n in named if n)
    if not counts:
        return None
    host, votes = counts.most_common(1)[0]
    return next(p for p in pods if p.host == host) if votes >= 2 else None


def test_first_install_failover_and_the_old_primary_returning_as_a_replica(pods: list[Pod]) -> None:
    for pod in pods:
        pod.start()
    _wait(lambda: _settled(pods, pods[0]), "pod 0 primary with two replicas and three Sentinels", pods)
    _write(pods[0], "before-failover")

    # The primary's pod is lost: its data node and its Sentinel.
    pods[0].kill()
    _wait(lambda: (p := _named_by_majority(pods)) is not None and p is not pods[0] and p.role()[0] == "master",
          "a failover to pod 1 or 2", pods)
    primary = _named_by_majority(pods)
    assert primary is not None
    _write(primary, "after-failover")

    # The pod comes back: its start script asks the other Sentinels and starts it as a replica of the new
    # primary; its Sentinel monitors the new primary (its own record still named pod 0).
    pods[0].start()
    _wait(lambda: _settled(pods, primary), f"pod 0 back as a replica of {primary.host}", pods)
    assert "starting as a replica of " + primary.host in pods[0].redis.log_tail(100)
    assert "the other Sentinels name " + primary.host in pods[0].sentinel.log_tail(100)
    _wait(lambda: _has(pods[0], "before-failover") and _has(pods[0], "after-failover"), "pod 0 in sync", pods)

    # Every pod at once (a node pool replaced, say): the Sentinels' records on the volumes keep the primary.
    for pod in pods:
        pod.kill()
    for pod in pods:
        pod.start()
    _wait(lambda: (p := _named_by_majority(pods)) is not None and _settled(pods, p), "one primary again", pods)
    after = _named_by_majority(pods)
    assert after is not None
    assert all(_has(after, key) for key in ("before-failover", "after-failover"))


def test_a_primary_with_an_empty_volume_does_not_start_as_primary(pods: list[Pod]) -> None:
    for pod in pods:
        pod.start()
    _wait(lambda: _settled(pods, pods[0]), "pod 0 primary with two replicas", pods)
    _write(pods[0], "k")
    # The data node loses its volume and restarts at once, before the Sentinels see it down.
    pods[0].redis.kill()
    shutil.rmtree(pods[0].data / "appendonlydir")
    pods[0].redis.start()
    _wait(lambda: not pods[0].redis.alive, "the start script refusing", pods, timeout=15)
    assert pods[0].redis.returncode == 1
    assert "not starting as an empty primary" in pods[0].redis.log_tail(20)
    # While it is down the Sentinels fail over; its next start follows the new primary and gets the data.
    _wait(lambda: (p := _named_by_majority(pods)) is not None and p is not pods[0], "a failover", pods)
    pods[0].redis.start()
    primary = _named_by_majority(pods)
    assert primary is not None
    _wait(lambda: _settled(pods, primary) and _has(pods[0], "k"), "pod 0 a replica again, with the data", pods)
