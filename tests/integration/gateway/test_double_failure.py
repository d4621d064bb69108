"""The double failure of issue 47, with real processes: never two entries under one (epoch, seq).

Three real ``redis-server``s: a primary P, a replica A that replicates through toxiproxy (so its link can be cut:
a lagging replica) and a replica B. Gateways (real processes) and the writer reach "the primary" through one more
toxiproxy proxy, which the test points at A when it promotes A, as Sentinel and a Service would. Python clients
(``StreamClient``) read through the gateways.

1. Batches 0..2 (seqs 1..9) reach every node; the clients apply them.
2. A's link is cut. Batch 3 (seqs 10..12) is committed with ``replicas=1``: B acknowledges it, so the writer
   returns and the clients apply it.
3. P and B are SIGKILLed, A (which never got batch 3) is promoted: the log went back to seq 9, same epoch.
4. The writer, killed before its checkpoint recorded batch 3, runs it again: the same processingIds with other
   values (a float sum in another order), published under seqs 10..12 again, then batch 4 (13..15).

Every client must end either having seen the same entries under the same (epoch, seq) as the log holds, or a
reset it was told about — and with the log's state. Two ways for a client to come back:

* ``survives``: its gateway keeps running and its reader follows the log onto A. Its hub sees the log go back
  and declares a new epoch (``declare_rewind.lua``); clients are closed 4409 "stream rewound" and resync.
* ``replaced``: its gateway dies with P and a new one starts on A's log, which never saw seqs 10..12 as the
  clients did: only the digest in the clients' cursors tells the entries apart (reset ``rewind``).

On 9d11b91 (no digest, no rewind epoch) both fail: the clients resume after seq 12 and keep batch 3's first
values under seqs the log holds with the others.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis as redis_lib

from sparkwire.client import ReconnectPolicy, StreamClient
from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter
from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import GatewayProcess, RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

CLIENTS = 3
QUERY = "double-failure"


def batch(first: int, last: int, value: float) -> list[Record]:
    """One record per key, so the state shows every entry's value."""
    return [Record(f"w-{n:03d}", f"k{n:03d}", json.dumps({"n": n, "sum": value})) for n in range(first, last + 1)]


@dataclass
class Nodes:
    primary: RedisServer
    lagging: RedisServer  # replicates through the "repl-a" proxy
    other: RedisServer
    toxiproxy: Toxiproxy
    front: int  # the port gateways and writers dial: "the primary"

    def client(self) -> redis_lib.Redis:
        return redis_lib.Redis(host="127.0.0.1", port=self.front, socket_timeout=5.0)

    def fail_over_to_the_lagging_replica(self) -> None:
        self.primary.kill()
        self.other.kill()
        redis_lib.Redis(host="127.0.0.1", port=self.lagging.port).replicaof("NO", "ONE")
        self.toxiproxy.repoint("front", self.lagging.port)


def _synced(server: RedisServer) -> bool:
    info = redis_lib.Redis(host="127.0.0.1", port=server.port).info("replication")
    return bool(info.get("master_link_status") == "up")


@pytest.fixture
def nodes(tmp_path: Path, toxiproxy: Toxiproxy) -> Iterator[Nodes]:
    with (RedisServer(tmp_path / "p") as primary, RedisServer(tmp_path / "a") as lagging,
          RedisServer(tmp_path / "b") as other):
        redis_lib.Redis(host="127.0.0.1", port=primary.port).config_set("repl-diskless-sync-delay", 0)
        link = toxiproxy.create_proxy("repl-a", primary.port)
        redis_lib.Redis(host="127.0.0.1", port=lagging.port).replicaof("127.0.0.1", link)
        redis_lib.Redis(host="127.0.0.1", port=other.port).replicaof("127.0.0.1", primary.port)
        deadline = time.monotonic() + 20
        while not (_synced(lagging) and _synced(other)):
            assert time.monotonic() < deadline, "the replicas never synced"
            time.sleep(0.05)
        front = toxiproxy.create_proxy("front", primary.port)
        yield Nodes(primary, lagging, other, toxiproxy, front)


Seen = tuple[str, int, str, object]  # (epoch, seq, processingId, data) of an entry a client applied


def watched(url: str) -> tuple[StreamClient, list[Seen]]:
    client = StreamClient(url, reconnect=ReconnectPolicy(initial_delay_s=0.2, max_delay_s=1.0))
    seen: list[Seen] = []

    def on_entry(entry: object) -> None:
        cursor = client.session.cursor  # already this entry's (epoch, seq) when it is applied
        assert cursor is not None
        seen.append((cursor.epoch, cursor.seq, entry.processing_id, entry.data))  # type: ignore[attr-defined]

    client.session.on_entry = on_entry  # type: ignore[assignment]
    return client, seen


def wait_for_meta(server: RedisServer, stream: str, last_seq: int) -> None:
    reader = ReplayLogReader(redis_lib.Redis(host="127.0.0.1", port=server.port), stream)
    deadline = time.monotonic() + 20
    while reader.meta().last_seq != last_seq:
        assert time.monotonic() < deadline, f"{server.port} never reached seq {last_seq}"
        time.sleep(0.05)


@pytest.mark.parametrize("gateway_fate", ["survives", "replaced"])
def test_after_a_double_failure_every_client_sees_the_log_s_entries_or_a_reset_never_two_under_one_seq(
    nodes: Nodes, tmp_path: Path, unique_name: str, gateway_fate: str
) -> None:
    stream = unique_name
    first_run = ReplayLogWriter(nodes.client(), stream, replicas=1)
    for number in range(3):
        first_run.commit_batch(QUERY, number, batch(3 * number + 1, 3 * number + 3, 1.0))
    wait_for_meta(nodes.lagging, stream, 9)
    gateway = GatewayProcess(tmp_path, f"redis://127.0.0.1:{nodes.front}/0", [stream]).start()
    try:
        outcome = asyncio.run(double_failure(nodes, gateway, first_run, stream, gateway_fate))
    finally:
        gateway_log = gateway.process.log_tail(40)
        # A pod that saw no rewind has no sample of the labelled counter: 0 then (only "survives" checks it).
        rewinds = gateway.metric("sparkwire_gateway_rewinds_total", default=0) if gateway.process.alive else None
        gateway.stop()

    log_epoch, log_entries, log_state, meta_counters, clients = outcome
    report = "\n".join(f"client {i}: resets {c.resets}, closes {c.closes}, saw {len(c.seen)} entries"
                       for i, c in enumerate(clients)) + f"\n--- gateway ---\n{gateway_log}"
    assert [seq for seq in log_entries] == list(range(1, 16))
    assert log_entries[12][1] == {"n": 12, "sum": 2.0}  # the log holds the re-run's values
    for client in clients:
        # Same (epoch, seq), same entry: whatever a client applied under the log's epoch is what the log holds.
        contradictions = [(epoch, seq, pid, data, log_entries.get(seq)) for epoch, seq, pid, data in client.seen
                          if epoch == log_epoch and log_entries.get(seq) != (pid, data)]
        assert not contradictions or client.resets.get("rewind"), f"{contradictions}\n{report}"
        assert client.state == log_state, f"the client kept values the log does not hold\n{report}"
    # Under the first epoch, every client saw the same entries (they all read P before it died).
    first = {(e, s): (p, d) for c in clients for e, s, p, d in c.seen if e != log_epoch}
    assert all(first[(e, s)] == (p, d) for c in clients for e, s, p, d in c.seen if e != log_epoch), report
    assert any(seq == 12 and data == {"n": 12, "sum": 1.0} for c in clients for _, seq, _, data in c.seen)
    if gateway_fate == "survives":
        # The surviving reader saw the log go back and declared the new epoch for it.
        assert meta_counters.get("rewinds") == 1, f"{meta_counters}\n{report}"
        assert rewinds is not None and rewinds >= 1, report
        assert "stream rewound" in gateway_log and all(c.closes.get(4409) for c in clients), report
    else:
        assert all(c.resets.get("rewind") == 1 for c in clients), report


@dataclass
class Outcome:
    seen: list[Seen]
    state: dict[str, tuple[str, object]]
    resets: dict[str, int]
    closes: dict[int, int]


async def double_failure(nodes: Nodes, gateway: GatewayProcess, first_run: ReplayLogWriter, stream: str,
                         gateway_fate: str) -> tuple[str, dict[int, tuple[str, object]], dict[str, tuple[str, object]],
                                                     dict[str, int], list[Outcome]]:
    clients = [watched(gateway.ws(stream)) for _ in range(CLIENTS)]
    tasks = [asyncio.create_task(client.run()) for client, _ in clients]
    try:
        for client, _ in clients:
            await client.wait_until(lambda c=client: c.cursor is not None and c.cursor.seq == 9, timeout=20)
        nodes.toxiproxy.add_fault("repl-a", "cut", "blackhole", {})  # A lags from here on
        await asyncio.to_thread(first_run.commit_batch, QUERY, 3, batch(10, 12, 1.0))  # B acknowledged it
        for client, _ in clients:
            await client.wait_until(lambda c=client: c.cursor is not None and c.cursor.seq == 12, timeout=20)

        if gateway_fate == "replaced":
            gateway.process.kill()
        await asyncio.to_thread(nodes.fail_over_to_the_lagging_replica)
        # The writer died before its checkpoint recorded batch 3: its re-run publishes it again, other values.
        rerun = ReplayLogWriter(nodes.client(), stream, replicas=0)
        await asyncio.to_thread(rerun.commit_batch, QUERY, 3, batch(10, 12, 2.0))
        await asyncio.to_thread(rerun.commit_batch, QUERY, 4, batch(13, 15, 2.0))
        if gateway_fate == "replaced":
            await asyncio.to_thread(gateway.start)

        reader = ReplayLogReader(redis_lib.Redis(host="127.0.0.1", port=nodes.lagging.port), stream)

        def at_the_log_s_head(client: StreamClient) -> bool:
            meta = reader.meta()
            return client.cursor is not None and (client.cursor.epoch, client.cursor.seq) == (meta.epoch, meta.last_seq)

        for client, _ in clients:
            await client.wait_until(lambda c=client: at_the_log_s_head(c), timeout=30)
    finally:
        for client, _ in clients:
            await client.stop()
        await asyncio.gather(*tasks, return_exceptions=True)

    meta = reader.meta()
    entries = {e.seq: (e.processing_id, json.loads(e.data)) for e in reader.iter_all()}
    state = {key: (item.processing_id, item.data) for key, item in reader.snapshot().items.items()}
    outcomes = [Outcome(seen, {key: (item.processing_id, item.data) for key, item in client.state.items()},
                        client.stats().resets, client.stats().closes) for client, seen in clients]
    return meta.epoch, entries, state, meta.counters, outcomes
