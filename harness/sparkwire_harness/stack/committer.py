"""A steady commit load through the real commit script, standing in for the aggregator in gateway tests,
the demo and the benchmarks."""

from __future__ import annotations

import json
import random
import threading

import redis as redis_lib

from sparkwire.replaylog import Record, ReplayLogWriter


class Committer:
    """Commits ``per_batch`` records every ``interval`` seconds in the background, like the aggregator."""

    def __init__(self, client: redis_lib.Redis, stream: str, *, per_batch: int = 5, interval: float = 0.05,
                 retention: int = 100_000, payload_bytes: int = 0) -> None:
        self.writer = ReplayLogWriter(client, stream, retention=retention)
        self.per_batch = per_batch
        self.interval = interval
        self.payload_bytes = payload_bytes
        self.batch_id = 0
        self.committed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def commit(self, batches: int = 1) -> None:
        for _ in range(batches):
            records = [self._record(self.committed + i) for i in range(self.per_batch)]
            self.writer.commit_batch("test-query", self.batch_id, records)
            self.batch_id += 1
            self.committed += self.per_batch

    def _record(self, n: int) -> Record:
        value: dict[str, object] = {"n": n}
        if self.payload_bytes:  # incompressible, so WebSocket compression cannot shrink it
            value["pad"] = random.Random(n).randbytes(self.payload_bytes // 2).hex()
        return Record(f"pid-{n:08d}", f"k{n % 7}", json.dumps(value))

    def start(self) -> Committer:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                self.commit()

        self._thread = threading.Thread(target=loop, daemon=True, name="committer")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
