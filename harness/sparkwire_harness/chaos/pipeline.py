"""The data path of a chaos run: the producer of live events, and the Spark aggregator kept running by a
supervisor that restarts it on its checkpoint whenever it exits — as the Spark operator's restart policy
does — so a SIGKILLed driver, or one that gave up on a broken link, comes back by itself."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sparkwire_harness.chaos.topology import DEAD_LETTER_TOPIC, STREAM, TOPIC, Topology
from sparkwire_harness.stack import ManagedProcess, free_port

WINDOW_MS = 2_000
# Far above the producer's disorder (300 ms): no event is late, whatever Spark's batch boundaries are
# when a restart or a slow link lets a backlog build up (see sparkwire_harness.verify.lateness).
DELAY_MS = 2_000
# With replicated Kafka, above the longest time one input partition stalls while the other runs on: a
# leader lost (SIGKILL or cut off) stops its partition until a new leader is elected (4-8 s measured) and
# the producer and Spark learn of it (metadata refreshed every 2 s / 5 s, a request timing out after 5 s).
# The watermark, taken over all partitions, moves on meanwhile, and a stalled partition's events would be
# dropped as late when they arrive — Spark's semantics, not a loss: a deployment's watermark delay must
# likewise exceed its Kafka failover time (docs/reliability.md).
REPLICATED_DELAY_MS = 20_000
MAX_DISORDER_MS = 300
PYTHON = [sys.executable, "-m", "sparkwire.cli"]


@dataclass
class Settings:
    rate: float = 100.0
    delay_ms: int = DELAY_MS
    trigger_ms: int = 500
    chunk_size: int = 3  # several chunks per batch: a kill between two of them is likely, not theoretical


@dataclass
class SupervisedAggregator:
    topology: Topology
    settings: Settings
    metrics_port: int = field(default_factory=free_port)
    exits: list[int] = field(default_factory=list)
    process: ManagedProcess | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def command(self) -> list[str]:
        topology = self.topology
        return [
            *PYTHON, "aggregate", "--bootstrap-servers", topology.kafka.spark_bootstrap, "--topic", TOPIC,
            "--dead-letter-topic", DEAD_LETTER_TOPIC, "--redis-url", topology.redis_access("spark-redis")[0],
            "--stream", STREAM, "--checkpoint", str(topology.workdir / "checkpoint"),
            "--window-ms", str(WINDOW_MS), "--watermark-delay-ms", str(self.settings.delay_ms),
            "--trigger-ms", str(self.settings.trigger_ms), "--chunk-size", str(self.settings.chunk_size),
            "--metrics-port", str(self.metrics_port), "--log-level", "WARNING",
        ]  # fmt: skip

    name = "aggregator"

    def environment(self) -> dict[str, str] | None:
        return {**self.topology.redis_access("spark-redis")[1], **self.topology.spark_scratch()}

    def start(self) -> None:
        self.process = ManagedProcess(self.name, self.command(), self.topology.workdir, env=self.environment())
        self.process.start()
        self._thread = threading.Thread(target=self._supervise, daemon=True, name=f"{self.name}-supervisor")
        self._thread.start()

    def _supervise(self) -> None:
        while not self._stop.wait(0.3):
            with self._lock:
                process = self.process
                if process is not None and not process.alive and not self._stop.is_set():
                    self.exits.append(process.returncode or 0)
                    process.start()

    def kill(self) -> int | None:
        """SIGKILL the driver's whole process group (Python and its JVM); the supervisor restarts it."""
        with self._lock:
            process = self.process
            pid = process.pid if process is not None else None
            if process is not None and process.alive:
                process.kill()
                self.exits.append(-9)
                process.start()
        return pid

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.process is not None:
            self.process.stop(timeout=30)


def producer(topology: Topology, settings: Settings, seconds: float, seed: int) -> ManagedProcess:
    """Live events for ``seconds`` (event time = wall time), 2% sent twice and 1% malformed, then heartbeats
    for a few seconds so the last window closes without more data."""
    return ManagedProcess("producer", [
        *PYTHON, "produce", "--bootstrap-servers", topology.kafka.bootstrap, "--topic", TOPIC, "--realtime",
        "--duration-ms", str(round(seconds * 1000)), "--rate", str(settings.rate), "--seed", str(seed),
        "--max-disorder-ms", str(MAX_DISORDER_MS), "--duplicate-ratio", "0.02", "--malformed-ratio", "0.01",
        "--heartbeat-ms", "500", "--idle-ms", str(settings.delay_ms + 4000),
        "--events-file", str(events_path(topology.workdir)), "--log-level", "WARNING",
    ], topology.workdir)  # fmt: skip


def events_path(workdir: Path) -> Path:
    return workdir / "events.jsonl"


def wait_exit(process: ManagedProcess, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while process.alive and time.monotonic() < deadline:
        time.sleep(0.5)
    return process.returncode
