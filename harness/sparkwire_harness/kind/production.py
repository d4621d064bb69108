"""A run's events: produced by a Job in the cluster (`sparkwire produce` in the gateway image), deterministic
(seed, start, count), so the expected results are computed here from the same generator, independently of
Spark."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

from sparkwire.producer.events import GeneratorConfig, generate
from sparkwire.replaylog.model import Entry
from sparkwire_harness.verify import WindowResult, expected_results

from .jobs import start_kafka_client_job, wait_job
from .kube import Kube
from .release import Release


@dataclass(frozen=True)
class Production:
    name: str  # the Job's
    config: GeneratorConfig
    count: int

    @property
    def start_ms(self) -> int:
        return self.config.start_ms

    def expected(self, window_ms: int, delay_ms: int) -> dict[str, WindowResult]:
        return expected_results((r.value for r in generate(self.config, self.count)), window_ms, delay_ms)

    def args(self, release: Release) -> list[str]:
        """`sparkwire produce` of these events into the release's Kafka, in real time."""
        c = self.config
        return ["sparkwire", "produce", "--bootstrap-servers", release.bootstrap_servers, "--topic", release.topic,
                "--count", str(self.count), "--rate", str(c.rate), "--metrics", str(c.metrics),
                "--seed", str(c.seed), "--start-ms", str(c.start_ms), "--max-disorder-ms", str(c.max_disorder_ms),
                "--duplicate-ratio", str(c.duplicate_ratio), "--malformed-ratio", str(c.malformed_ratio),
                "--realtime", "--log-level", "WARNING"]


def first_window_start(window_ms: int, delay_ms: int, log: list[Entry], now_ms: int) -> int:
    """Where a new run's event time starts so that its windows hold only its own events: after every
    earlier run's. An earlier run's last event is at most ``delay + window`` after the last window end it
    got committed (its later windows are still open), so three windows past that (and ahead of the wall
    clock), on a window boundary."""
    last_end = max((json.loads(e.data).get("windowEnd", 0) for e in log), default=0)
    earliest = max(now_ms + window_ms, last_end + delay_ms + 3 * window_ms)
    return (earliest // window_ms + 1) * window_ms


def new_production(release: Release, seconds: float, log: list[Entry], rate: float = 200.0) -> Production:
    """A run of ``seconds`` at ``rate`` starting after the runs in ``log`` (``first_window_start``): its
    windows are those from ``start_ms - window`` on (``max_disorder_ms`` < window moves events back a
    little); the earlier runs' open windows, closed by this run's watermark, come before and are not
    compared. 40 metrics, 2 % duplicates, 1 % malformed records, 1 s of disorder."""
    start_ms = first_window_start(release.window_ms, release.delay_ms, log, int(time.time() * 1000))
    config = GeneratorConfig(seed=random.randrange(1, 2**31), metrics=40, rate=rate, start_ms=start_ms,
                             max_disorder_ms=1000, duplicate_ratio=0.02, malformed_ratio=0.01)
    return Production(name=f"produce-{start_ms}", config=config, count=int(seconds * rate))


def start_producer(kube: Kube, release: Release, production: Production, off_node: str | None = None) -> None:
    start_kafka_client_job(kube, release.gateway_image, production.name, production.args(release),
                           off_node=off_node)
    kube.note(f"producer {production.name}: {production.count} events from {production.start_ms}")


def wait_producer(kube: Kube, production: Production, timeout: float) -> None:
    wait_job(kube, production.name, timeout)
