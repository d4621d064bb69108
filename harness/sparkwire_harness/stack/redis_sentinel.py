"""A replicated local Redis: a primary, two replicas and three Redis Sentinels watching them, every one a real
``redis-server`` process on 127.0.0.1, to see what a failover does to sparkwire."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from sparkwire.replaylog.redis_url import connect

from .ports import free_port
from .process import ReadyTimeoutError
from .redis_server import RedisProcess, RedisServer, redis_server_executable

# (link name, port on 127.0.0.1) -> the port to dial instead (e.g. a toxiproxy proxy in front of it).
Route = Callable[[str, int], int]

MASTER_NAME = "sparkwire"
# A primary that does not answer for this long is down (subjectively; objectively once a quorum agrees).
# Not 1 s: that equals the sentinels' own ping and reconnect period, and with it 2 failovers in 20 here were
# followed by a needless second one: right after +switch-master a sentinel marked the new primary down
# 1.01 s later and, counting the other sentinels' "down" answers from the first failover, at once
# objectively down. 2 s made none in 12 (a failover then takes ~3.3 s here instead of ~2.3 s).
DOWN_AFTER_MS = 2_000
# Bounds one failover attempt; a sentinel tries again after twice this if an election or promotion failed.
FAILOVER_TIMEOUT_MS = 4_000
MIN_REPLICAS_MAX_LAG_S = 3

# On every data node, since a replica keeps its settings when it is promoted: a primary takes writes only
# while a replica acknowledged the replication stream within the last MIN_REPLICAS_MAX_LAG_S seconds. A
# primary cut off from its replicas (which the sentinels on their side then replace) stops taking writes
# after those seconds instead of taking writes the failover throws away: they bound what such a primary
# can accept and lose.
_DATA_NODE_ARGS = (
    "--min-replicas-to-write", "1",
    "--min-replicas-max-lag", str(MIN_REPLICAS_MAX_LAG_S),
    # A replica syncs at once rather than after the primary waited 5 s for more replicas to share the transfer.
    "--repl-diskless-sync-delay", "0",
)  # fmt: skip

def _pairs(reply: Any) -> dict[str, str]:
    """A Sentinel reply as a dict of text: redis-py 8 already makes one of the flat field, value list."""
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
    return {str(key): str(value) for key, value in items}


def _local(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0, socket_connect_timeout=1.0,
                       decode_responses=True)


def _replication(port: int) -> dict[str, str]:
    with _local(port) as client:
        info: dict[str, Any] = client.info("replication")
    return {key: str(value) for key, value in info.items()}


class SentinelServer(RedisProcess):
    """``redis-server --sentinel`` with its config file in ``workdir``: written at the first start, then the
    sentinel's own (it records there what it learns, so a restart keeps that)."""

    def __init__(self, workdir: Path, primary_port: int, quorum: int) -> None:
        self.config = Path(workdir) / "sentinel.conf"
        self._primary_port = primary_port
        self._quorum = quorum
        port = free_port()
        super().__init__(workdir, port, f"sentinel-{port}")

    def _command(self) -> list[str]:
        return [redis_server_executable(), str(self.config), "--sentinel"]

    def _prepare(self) -> None:
        if not self.config.exists():
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.config.write_text("\n".join([
                f"port {self.port}", "bind 127.0.0.1", "daemonize no", 'logfile ""', f"dir {self.workdir}",
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self._primary_port} {self._quorum}",
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}",
                f"sentinel parallel-syncs {MASTER_NAME} 2", "",
            ]))

    def client(self) -> redis.Redis:
        return _local(self.port)

    def named_primary_port(self) -> int | None:
        """The port this sentinel names as the primary's (None if it does not answer)."""
        try:
            with self.client() as client:
                reply = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        except (redis.RedisError, OSError):
            return None
        return int(reply[1]) if reply else None

    def view(self) -> tuple[dict[str, str], list[dict[str, str]]]:
        """This sentinel's state of the primary and of its replicas (SENTINEL MASTER, SENTINEL REPLICAS)."""
        with self.client() as client:
            primary = _pairs(client.execute_command("SENTINEL", "MASTER", MASTER_NAME))
            replicas = [_pairs(r) for r in client.execute_command("SENTINEL", "REPLICAS", MASTER_NAME)]
        return primary, replicas


class ReplicatedRedis:
    """1 primary + ``replicas`` replicas (durable: AOF, fsync always, as :class:`RedisServer`) watched by
    ``sentinels`` sentinels (quorum: a majority), in sub-folders of ``workdir``. ``url`` is the
    ``redis+sentinel://`` URL of it (:mod:`sparkwire.replaylog.redis_url`).

    With ``route``, every data node announces ``route("redis-repl-n<i>", port)`` instead of its port: the
    replicas and the sentinels reach it there, so a fault on that one link cuts the node off from them while
    other clients still reach it (the chaos run's "primary partitioned"). The sentinels name nodes by it.
    """

    def __init__(self, workdir: Path, *, replicas: int = 2, sentinels: int = 3, route: Route | None = None) -> None:
        self.workdir = Path(workdir)
        self.nodes = [RedisServer(self.workdir / f"redis-{i}") for i in range(replicas + 1)]
        self._announced = {node.port: route(self.link(node), node.port) if route else node.port for node in self.nodes}
        first = self.nodes[0]
        for node in self.nodes:
            node.extra_args = self._data_node_args(node, None if node is first else first)
        self.quorum = sentinels // 2 + 1
        self.sentinels = [SentinelServer(self.workdir / f"sentinel-{i}", self.announced_port(first), self.quorum)
                          for i in range(sentinels)]

    def link(self, node: RedisServer) -> str:
        """The name of the link the replicas and the sentinels reach ``node`` by (its ``route``)."""
        return f"redis-repl-n{self.nodes.index(node)}"

    def announced_port(self, node: RedisServer) -> int:
        """The port the sentinels name ``node`` by (its own, unless routed)."""
        return self._announced[node.port]

    def _data_node_args(self, node: RedisServer, primary: RedisServer | None) -> list[str]:
        args = [*_DATA_NODE_ARGS, "--replica-announce-ip", "127.0.0.1",
                "--replica-announce-port", str(self.announced_port(node))]
        if primary is not None:
            args += ["--replicaof", "127.0.0.1", str(self.announced_port(primary))]
        return args

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}/0"

    def client(self, **kwargs: Any) -> redis.Redis:
        """A client of the current primary that follows failovers (:func:`sparkwire.replaylog.redis_url.connect`)."""
        return connect(self.url, **kwargs)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        """Start everything and wait until the replicas are in sync and every sentinel sees the primary, each
        replica and the other sentinels (so a failover can happen from then on)."""
        deadline = time.monotonic() + timeout
        primary, replicas = self.nodes[0], self.nodes[1:]
        try:
            for node in self.nodes:
                node.start(timeout)
            self._wait(lambda: all(self._linked(node, primary) for node in replicas), deadline,
                       "replicas in sync with the primary")
            for sentinel in self.sentinels:
                sentinel.start(timeout)
            self._wait(lambda: all(self._sees_everything(s, primary) for s in self.sentinels), deadline,
                       "sentinels seeing the primary, the replicas and each other")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for sentinel in self.sentinels:  # first, so that stopping the primary starts no failover
            sentinel.stop()
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> ReplicatedRedis:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- roles ---------------------------------------------------------------------------------------

    def primary(self) -> RedisServer:
        """The data node most sentinels name as the primary now."""
        ports = self._named_primary_ports()
        if not ports:
            raise RuntimeError(f"no sentinel names a primary:\n{self.log_tail()}")
        return self._node(Counter(ports).most_common(1)[0][0])

    def replicas(self) -> list[RedisServer]:
        primary = self.primary()
        return [node for node in self.nodes if node is not primary]

    def kill_primary(self) -> RedisServer:
        """SIGKILL the current primary (a crash); returns it."""
        primary = self.primary()
        primary.kill()
        return primary

    def wait_for_failover(self, old_primary: RedisServer, timeout: float = 30.0) -> RedisServer:
        """Wait until every running sentinel names the same new primary and it answers as one; return it."""
        old_port = self.announced_port(old_primary)

        def promoted() -> bool:
            ports = self._named_primary_ports()
            alive = sum(1 for sentinel in self.sentinels if sentinel.process.alive)
            return (len(ports) == alive and len(set(ports)) == 1 and ports[0] != old_port
                    and self._role(self._node(ports[0])) == "master")

        self._wait(promoted, time.monotonic() + timeout, f"a failover away from redis {old_primary.port}")
        return self.primary()

    def restart(self, node: RedisServer | SentinelServer, timeout: float = 30.0) -> None:
        """Stop (if running) and start one process. A data node that is not the primary the sentinels name
        comes back as a replica of it (as a deployment's start script asks the sentinels): a crashed old
        primary does not come back as a second primary; this waits until it is in sync and every running
        sentinel sees it up. A sentinel keeps what it learnt (its config file)."""
        deadline = time.monotonic() + timeout
        node.stop()
        if isinstance(node, SentinelServer):
            node.start(timeout)
            self._wait(lambda: node.named_primary_port() is not None, deadline, f"{node.process.name} naming a primary")
            return
        primary = self.primary()
        node.extra_args = self._data_node_args(node, None if primary is node else primary)
        node.start(timeout)
        if primary is not node:
            self._wait(lambda: self._linked(node, primary) and self._sentinels_see_up(node), deadline,
                       f"redis {node.port} in sync with the primary and seen up by the sentinels")

    def wait_rejoined(self, node: RedisServer, timeout: float = 30.0) -> None:
        """Wait until ``node`` (a primary replaced while it was cut off, now reachable again) is a replica in
        sync with the primary and every running sentinel sees it up: the sentinels reconfigure it themselves."""
        self._wait(lambda: self._linked(node, self.primary()) and self._sentinels_see_up(node),
                   time.monotonic() + timeout, f"redis {node.port} back in sync as a replica")

    def log_tail(self, lines: int = 20) -> str:
        named = [(f"redis {node.port}", node.process) for node in self.nodes]
        named += [(f"sentinel {sentinel.port}", sentinel.process) for sentinel in self.sentinels]
        return "\n".join(f"--- {name} ({'running' if process.alive else f'exited ({process.returncode})'}, "
                         f"{process.log_path}) ---\n{process.log_tail(lines)}" for name, process in named)

    # -- checks --------------------------------------------------------------------------------------

    def _wait(self, condition: Callable[[], bool], deadline: float, what: str) -> None:
        while True:
            try:
                if condition():
                    return
            except (redis.RedisError, OSError, KeyError, ValueError, IndexError):
                pass  # not up yet, or a reply of a sentinel that is still learning
            if time.monotonic() >= deadline:
                raise ReadyTimeoutError(f"no {what} in time:\n{self.log_tail()}")
            time.sleep(0.1)

    def _node(self, port: int) -> RedisServer:
        for node in self.nodes:
            if self.announced_port(node) == port:
                return node
        raise KeyError(f"no data node announced on port {port}")

    def _named_primary_ports(self) -> list[int]:
        ports = [sentinel.named_primary_port() for sentinel in self.sentinels if sentinel.process.alive]
        return [port for port in ports if port is not None]

    @staticmethod
    def _role(node: RedisServer) -> str:
        try:
            with _local(node.port) as client:
                return str(client.execute_command("ROLE")[0])
        except (redis.RedisError, OSError):
            return "down"

    def _linked(self, replica: RedisServer, primary: RedisServer) -> bool:
        info = _replication(replica.port)
        return (info.get("role") == "slave" and info.get("master_port") == str(self.announced_port(primary))
                and info.get("master_link_status") == "up")

    def _sees_everything(self, sentinel: SentinelServer, primary: RedisServer) -> bool:
        state, replicas = sentinel.view()
        healthy = {int(r["port"]) for r in replicas
                   if r["flags"] == "slave" and r.get("master-link-status") == "ok"}
        return (state["flags"] == "master" and int(state["port"]) == self.announced_port(primary)
                and int(state["num-other-sentinels"]) == len(self.sentinels) - 1
                and healthy == {self.announced_port(node) for node in self.nodes if node is not primary})

    def _sentinels_see_up(self, node: RedisServer) -> bool:
        for sentinel in self.sentinels:
            if not sentinel.process.alive:
                continue
            _, replicas = sentinel.view()
            flags = [set(r["flags"].split(",")) for r in replicas if int(r["port"]) == self.announced_port(node)]
            if not flags or flags[0] & {"s_down", "o_down", "disconnected"}:
                return False
        return True
