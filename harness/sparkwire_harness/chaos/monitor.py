"""What a chaos run watches while it runs: once a second, the log's head and the slowest client's seq
(for recovery times); every few seconds, the Prometheus text of every gateway and of the aggregator,
kept per process incarnation (a SIGKILLed process's counters die with it: its last scrape stands in)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import redis as redis_lib
import redis.sentinel as redis_sentinel

from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.chaos.recovery import Sample


def parse_prometheus(text: str) -> dict[str, float]:
    """Sample name (labels included) -> value; comments skipped."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                samples[name] = float(value)
            except ValueError:
                continue
    return samples


def _follow_failover(client: redis_lib.Redis) -> None:
    """The head is read on the primary the sentinels name now: this client crosses no faulty link, so it
    still reaches a primary cut off from the others (partition) and would read its log, which no longer
    grows, until the sentinels demote it after the heal (``sparkwire.replaylog.redis_url.FailoverFollower`` is the
    gateways' asyncio twin). A one-server client: nothing to ask."""
    pool = client.connection_pool
    if isinstance(pool, redis_sentinel.SentinelConnectionPool) and pool.is_master:
        before = pool.master_address
        if before is not None and tuple(pool.get_master_address()) != tuple(before):  # type: ignore[no-untyped-call]
            pool.disconnect()


def client_id(process: str, key: object) -> str:
    """How a run names a client: its process and its id there (``clients-slow:56``, ``page:page``)."""
    return f"{process}:{key}"


def metric_sum(samples: dict[str, float], name: str) -> float:
    """Every sample of ``name`` summed over its label sets."""
    return sum(v for k, v in samples.items() if k == name or k.startswith(name + "{"))


class Monitor:
    def __init__(self, redis: redis_lib.Redis, stream: str, status_files: list[Path],
                 scrape_targets: Callable[[], dict[str, tuple[int | None, int]]]) -> None:
        """``redis``: a client (with short timeouts) of the log; ``scrape_targets()``: process name -> (its
        current pid, its metrics port)."""
        self._redis = redis
        self._reader = ReplayLogReader(redis, stream)
        self._status_files = status_files
        self._targets = scrape_targets
        self.samples: list[Sample] = []
        self.scrapes: dict[tuple[str, int], dict[str, float]] = {}
        self.seqs: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="monitor")

    def head(self) -> int:
        try:
            _follow_failover(self._redis)
            return self._reader.meta().last_seq
        except (redis_lib.RedisError, OSError):
            return -1

    def client_seqs(self) -> dict[str, int]:
        """Each client's last seq, -1 while it is away on purpose, from the status files."""
        seqs: dict[str, int] = {}
        for path in self._status_files:
            try:
                status = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            process = path.name.removesuffix(".status.json")
            seqs.update({client_id(process, key): int(value) for key, value in status["seqs"].items()})
        return seqs

    def sample(self) -> Sample:
        head = self.head()
        self.seqs = self.client_seqs()
        present = [seq for seq in self.seqs.values() if seq >= 0]
        sample = Sample(time.time(), head, min(present) if present else -1,
                        {k: v for k, v in self.seqs.items() if v >= 0})
        self.samples.append(sample)
        return sample

    def scrape(self) -> None:
        for name, (pid, port) in self._targets().items():
            if pid is None:
                continue
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    self.scrapes[(name, pid)] = parse_prometheus(response.read().decode())
            except OSError:
                continue  # down, paused or restarting: its previous scrape stands

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(1.0):
            self.sample()
            ticks += 1
            if ticks % 3 == 0:
                self.scrape()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.scrape()

    def total(self, prefix: str, name: str) -> float:
        """``name`` summed over every incarnation of the processes whose name starts with ``prefix``."""
        return sum(metric_sum(samples, name) for (process, _), samples in self.scrapes.items()
                   if process.startswith(prefix))
