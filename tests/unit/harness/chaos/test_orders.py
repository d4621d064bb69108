"""The filtered orders clients' check (update mode): revisions, removals and the final state against the
oracle of each client's view, with a fake client standing in for a connected one."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sparkwire.protocol.items import StateItem
from sparkwire.replaylog.model import Entry
from sparkwire_harness.chaos.orders import FilteredOrdersClient, check_filtered, sequence_problems
from sparkwire_harness.chaos.views import Profile, update_oracle

BUSY = Profile("busy", scope={"$key": {"in": ["eu", "us"]}}, filter={"orders": {"ge": 3}})


def entries() -> list[Entry]:
    rows = [("eu", 1), ("eu", 3), ("ap", 9), ("us", 5), ("eu", 1), ("eu", 4), ("us", 2), ("ap", 1)]
    return [Entry(seq, f"w{seq}|{key}@{seq}", key, json.dumps({"region": key, "orders": n}), 1_000 * seq, seq)
            for seq, (key, n) in enumerate(rows, start=1)]


@dataclass
class FakeStats:
    duplicates: int = 0
    gaps: int = 0
    resets: dict[str, int] = field(default_factory=lambda: {"no_position": 1})


@dataclass
class FakeClient:
    applied: list[tuple[int, str]]
    state: dict[str, StateItem]
    counts: FakeStats = field(default_factory=FakeStats)

    def stats(self) -> FakeStats:
        return self.counts


@dataclass
class FakeBackground:
    client: FakeClient


def as_received(applied: list[tuple[int, str]], removals: list[tuple[int, str]], **state: int) -> FilteredOrdersClient:
    by_seq = {e.seq: e for e in entries()}
    held = {key: StateItem(seq=seq, processing_id=by_seq[seq].processing_id, data=json.loads(by_seq[seq].data))
            for key, seq in state.items()}
    fake: Any = FakeBackground(FakeClient(applied, held))
    return FilteredOrdersClient(BUSY, fake, removals)


def pid(seq: int) -> str:
    return entries()[seq - 1].processing_id


def test_the_oracle_of_the_busy_view_moves_keys_out_and_in() -> None:
    rows = [(e.seq, e.processing_id, e.key, json.loads(e.data)) for e in entries()]
    oracle = update_oracle(BUSY, rows)
    assert oracle.entries == [(2, pid(2)), (4, pid(4)), (6, pid(6))]
    assert oracle.removals == [(5, "eu"), (7, "us")] and oracle.state == {"eu": (6, pid(6))}


def test_a_client_that_applied_its_view_and_its_removals_once_passes() -> None:
    good = as_received([(2, pid(2)), (4, pid(4)), (6, pid(6))], [(5, "eu"), (7, "us")], eu=6)
    assert check_filtered(good, entries()) == []


def test_an_extra_a_missing_or_an_out_of_scope_revision_fails() -> None:
    extra = as_received([(1, pid(1)), (2, pid(2)), (4, pid(4)), (6, pid(6))], [(5, "eu"), (7, "us")], eu=6)
    assert any("seq 1" in p and "its oracle does not hold" in p for p in check_filtered(extra, entries()))
    missing = as_received([(2, pid(2)), (6, pid(6))], [(5, "eu"), (7, "us")], eu=6)
    assert any("1 revisions of its oracle never applied, the first at seq 4" in p
               for p in check_filtered(missing, entries()))
    scope = as_received([(2, pid(2)), (3, pid(3)), (4, pid(4)), (6, pid(6))], [(5, "eu"), (7, "us")], eu=6)
    problems = check_filtered(scope, entries())
    assert problems[0] == "revision at seq 3 (ap) applied, outside its scope"


def test_a_removal_missed_or_received_twice_or_a_wrong_final_state_fails() -> None:
    applied = [(2, pid(2)), (4, pid(4)), (6, pid(6))]
    missed = check_filtered(as_received(applied, [(5, "eu")], eu=6, us=4), entries())
    assert any("1 removals of its oracle never applied, the first at seq 7" in p for p in missed)
    assert any("holds" in p and "its oracle" in p for p in missed)
    twice = check_filtered(as_received(applied, [(5, "eu"), (5, "eu"), (7, "us")], eu=6), entries())
    assert any("removal at seq 5 (eu) applied twice" in p for p in twice)
    stray = check_filtered(as_received(applied, [(5, "eu"), (7, "us"), (8, "ap")], eu=6), entries())
    assert any("removal at seq 8 (ap)" in p for p in stray)


def test_the_clients_own_counters_and_a_snapshot_restart_fail() -> None:
    client = as_received([(2, pid(2)), (4, pid(4)), (6, pid(6))], [(5, "eu"), (7, "us")], eu=6)
    fake: Any = client.background
    fake.client.counts = FakeStats(gaps=1, resets={"no_position": 1, "view_changed": 1})
    assert any("1 gaps" in p and "view_changed" in p for p in check_filtered(client, entries()))


def test_sequence_problems_names_order_repeats_and_strangers() -> None:
    want = [(1, "a"), (3, "b"), (5, "c")]
    assert sequence_problems(want, want, "revision") == []
    assert sequence_problems([(3, "b"), (1, "a"), (5, "c")], want, "revision") == [
        "revision at seq 1 applied after seq 3"]
