"""A Redis failover under a running gateway: the primary of a replicated Redis (three sentinels, real
processes) is SIGKILLed while a writer commits batches and clients read them through one gateway started with
the Sentinel URL. Every client ends with every committed record once, in order, and the gateway is the
process it was (issue 18: replicated state)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sparkwire.client import ClientStats, ReconnectPolicy, StreamClient
from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter
from sparkwire.replaylog.redis_url import connect
from sparkwire_harness.stack import GatewayProcess, ReplicatedRedis

from .conftest import wait_for

CLIENTS = 10
LATE_CLIENTS = 3
PER_BATCH = 5
BATCHES_AFTER_FAILOVER = 30


class BackgroundWriter:
    """Commits a batch every few ms as a sink would: each through ``commit_batch`` (30 s of retries, and a
    WAIT for a replica before it returns), so a batch counts as committed once the call returned."""

    def __init__(self, writer: ReplayLogWriter) -> None:
        self.writer = writer
        self.committed: list[str] = []  # processing ids, in commit order
        self.batches = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="writer")

    def commit(self) -> None:
        n = len(self.committed)
        # Zero-padded ids: the writer's chunk order (by processing id) is the order they were made in.
        records = [Record(f"pid-{i:08d}", f"k{i % 7}", json.dumps({"n": i})) for i in range(n, n + PER_BATCH)]
        self.writer.commit_batch("failover-query", self.batches, records)
        self.committed.extend(record.processing_id for record in records)
        self.batches += 1

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.02):
                self.commit()
        except BaseException as error:
            self.errors.append(error)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join()


def test_every_client_gets_every_committed_record_once_across_a_redis_failover(
    tmp_path: Path, unique_name: str
) -> None:
    with ReplicatedRedis(tmp_path / "redis") as replicated:
        background = BackgroundWriter(ReplayLogWriter(connect(replicated.url), unique_name, replicas=1))
        background.commit()  # batch 0: the clients start from its snapshot
        snapshot_seq = ReplayLogReader(connect(replicated.url), unique_name).meta().last_seq
        gateway = GatewayProcess(tmp_path, replicated.url, [unique_name]).start()
        gateway_pid = gateway.process.pid
        timings: dict[str, float] = {}
        try:
            early, late = asyncio.run(read_across_a_failover(gateway.ws(unique_name), replicated, background,
                                                             timings))
            log = list(ReplayLogReader(connect(replicated.url), unique_name).iter_all())
            xread_errors = gateway.metric('sparkwire_gateway_redis_errors_total{operation="xread"}')
        finally:
            background.stop()
            gateway_log = gateway.process.log_tail(30)
            gateway.stop()

    assert background.errors == [], f"{[str(e) for e in background.errors]}\n{gateway_log}"
    assert gateway.process.pid == gateway_pid  # never restarted; it was running until stopped here
    assert xread_errors >= 1  # its stream reader was on the killed primary, and moved to the new one
    committed = background.committed[PER_BATCH:]  # after batch 0
    assert len(committed) >= (BATCHES_AFTER_FAILOVER + 1) * PER_BATCH
    # The log holds every committed record once, in commit order, no seq skipped (nothing else checks it).
    after_snapshot = [(e.seq, e.processing_id) for e in log if e.seq > snapshot_seq]
    assert [pid for _, pid in after_snapshot] == committed
    assert [seq for seq, _ in after_snapshot] == list(range(snapshot_seq + 1, snapshot_seq + 1 + len(committed)))
    newest = {e.key: e.processing_id for e in log}
    report = "\n".join([f"failover {timings['failover']:.1f} s, {len(committed)} records committed after batch 0, "
                         f"{xread_errors:.0f} failed XREADs of the gateway",
                         *(f"{'late ' if i >= CLIENTS else ''}client {i}: {c.stats.reconnects} reconnects, "
                           f"closes {c.stats.closes}, resets {c.stats.resets}, gaps {c.stats.gaps}, "
                           f"duplicates {c.stats.duplicates}" for i, c in enumerate(early + late))])
    for client in early:
        assert client.applied == after_snapshot, report
    for client in late:  # from their snapshot, taken after the failover, on: the rest of the log, once
        assert client.applied and client.applied == after_snapshot[-len(client.applied):], report
    for client in early + late:
        assert client.state == newest, report
    print(report)


@dataclass(frozen=True)
class Seen:
    applied: list[tuple[int, str]]
    stats: ClientStats
    state: dict[str, str]  # key -> processing id


def seen(client: StreamClient) -> Seen:
    return Seen(list(client.applied), client.stats(),
                {key: item.processing_id for key, item in client.state.items()})


async def read_across_a_failover(url: str, replicated: ReplicatedRedis, background: BackgroundWriter,
                                 timings: dict[str, float]) -> tuple[list[Seen], list[Seen]]:
    """``CLIENTS`` clients reading from before the kill, ``LATE_CLIENTS`` connecting right after the failover
    (their hello and snapshot read from the new primary), all until the last committed seq."""
    def new_client() -> StreamClient:
        return StreamClient(url, reconnect=ReconnectPolicy(initial_delay_s=0.2, max_delay_s=1.0), keep_applied=True)

    early = [new_client() for _ in range(CLIENTS)]
    late = [new_client() for _ in range(LATE_CLIENTS)]
    tasks = [asyncio.create_task(client.run()) for client in early]
    try:
        for client in early:
            await client.wait_until(lambda client=client: client.cursor is not None, timeout=30)
        background.start()
        await asyncio.sleep(2)  # clients reading live batches
        old = await asyncio.to_thread(replicated.kill_primary)
        killed_at = time.monotonic()
        await asyncio.to_thread(replicated.wait_for_failover, old, 30)
        timings["failover"] = time.monotonic() - killed_at
        tasks += [asyncio.create_task(client.run()) for client in late]
        batches = background.batches
        await asyncio.to_thread(wait_for, lambda: background.batches >= batches + BATCHES_AFTER_FAILOVER or
                                background.errors, 30)
        await asyncio.to_thread(background.stop)
        head = len(background.committed)  # seq == number of records: the log started empty, one record each
        for client in early + late:
            await client.wait_until(lambda client=client: client.cursor is not None and client.cursor.seq >= head,
                                    timeout=30)
    finally:
        for client in early + late:
            await client.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [seen(client) for client in early], [seen(client) for client in late]
