"""The real-time large-orders feed's check in a chaos run: its log against ``expected_feed`` (gap-free, each
entry once and as computed), each client's render against the log; and its clients' plans."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from sparkwire.examples.large_orders.expected import expected_feed
from sparkwire.examples.orders.expected import Order
from sparkwire.replaylog.model import Entry
from sparkwire_harness.chaos.clients import digest
from sparkwire_harness.chaos.large_orders import CLIENT_KINDS, THRESHOLD, check_feed, client_plans

ORDERS = [Order(0, 0, "o-1", "eu-west", Decimal("700.00"), 1_000),
          Order(1, 0, "o-2", "us-east", Decimal("20.00"), 2_000),  # below the threshold: no entry
          Order(1, 1, "o-3", "us-east", Decimal("500.00"), 3_000),  # at the threshold: an entry
          Order(0, 1, "o-4", "eu-west", Decimal("999.99"), 4_000)]


def expected() -> dict[str, dict[str, Any]]:
    return expected_feed(ORDERS, "orders", THRESHOLD)


def log(order: list[str] | None = None) -> list[Entry]:
    feed = expected()
    pids = order if order is not None else list(feed)
    return [Entry(seq, pid, str(feed[pid]["region"]), json.dumps({"processingId": pid, **feed[pid]}), 1_000 * seq, 0)
            for seq, pid in enumerate(pids, start=1)]


def client(entries: list[Entry], segments: list[list[int]], client_id: int = 0, kind: str = "steady") -> dict[str, Any]:
    by_seq = {e.seq: e for e in entries}
    state = {e.key: [e.seq, e.processing_id, digest(json.loads(e.data))] for e in entries}
    return {"id": client_id, "kind": kind, "edge": "edge-0",
            "segments": [[[seq, by_seq[seq].processing_id, digest(json.loads(by_seq[seq].data)), "e1"]
                          for seq in segment] for segment in segments],
            "state": state, "sessions": [{"duplicates": 0, "gaps": 0, "resets": {"no_position": 1}}], "terminal": None}


def clients(entries: list[Entry], first: list[list[int]] | None = None) -> list[dict[str, Any]]:
    every = [e.seq for e in entries]
    found = [client(entries, first or [every], 0)]
    found += [client(entries, [every], index, kind) for index, kind in enumerate(CLIENT_KINDS[1:], start=1)]
    return found


def test_the_oracle_s_log_rendered_once_by_every_client_is_ok() -> None:
    entries = log()
    # A session resume: the gateway re-sends from the session's last ack, a new segment.
    resumed = clients(entries, first=[[1, 2], [2, 3]])
    check = check_feed(entries, expected(), resumed, refused=5, driver_exits=2)
    assert check.ok, check.lines
    assert check.lines == ["large-orders (real-time): OK exactly once, 3 entries, 5 re-sent rows refused; 4 clients "
                           "x 3 entries (1 session resumes), driver exits 2"]


def test_a_record_committed_twice_fails() -> None:
    pids = list(expected())
    entries = log([*pids, pids[0]])
    check = check_feed(entries, expected(), clients(entries), refused=0, driver_exits=1)
    assert not check.ok
    assert any("delivered twice: orders/0/0" in line for line in check.lines), check.lines


def test_a_missing_entry_and_a_gap_in_the_seqs_fail() -> None:
    entries = [e for e in log() if e.seq != 2]
    check = check_feed(entries, expected(), clients(entries), refused=0, driver_exits=0)
    assert not check.ok
    assert any("not gap-free: seq 3 where 2 belongs" in line for line in check.lines), check.lines
    assert any("missing: orders/1/1" in line for line in check.lines), check.lines


def test_a_wrong_payload_fails() -> None:
    entries = log()
    wrong = json.loads(entries[0].data) | {"amount": "7.00"}
    entries[0] = Entry(1, entries[0].processing_id, entries[0].key, json.dumps(wrong), 1_000, 0)
    check = check_feed(entries, expected(), clients(entries), refused=0, driver_exits=0)
    assert not check.ok and any(line.startswith("large-orders (real-time) problem: log: wrong: orders/0/0")
                                for line in check.lines), check.lines


def test_a_client_that_rendered_an_entry_twice_or_missed_one_fails() -> None:
    entries = log()
    twice = check_feed(entries, expected(), clients(entries, first=[[1, 2, 2, 3]]), refused=0, driver_exits=0)
    assert not twice.ok and any("client 0 (steady, edge-0), seq 2" in line for line in twice.lines), twice.lines
    missed = check_feed(entries, expected(), clients(entries, first=[[1, 3]]), refused=0, driver_exits=0)
    assert not missed.ok and any("jumped from seq 1 to 3" in line for line in missed.lines), missed.lines


def test_an_empty_log_or_a_missing_client_report_fails() -> None:
    assert not check_feed([], {}, clients([]), refused=0, driver_exits=0).ok
    entries = log()
    assert not check_feed(entries, expected(), clients(entries)[:2], refused=0, driver_exits=0).ok


def test_client_plans_one_per_kind_resuming_inside_the_window_and_the_same_for_a_seed() -> None:
    plans = client_plans(7, 120.0, ["edge-0", "edge-1"])
    assert [p["kind"] for p in plans] == list(CLIENT_KINDS)
    assert {p["edge"] for p in plans} == {"edge-0", "edge-1"}
    for plan in plans:
        if plan["kind"] == "steady":
            assert plan["absences"] == []
        else:
            [(leave, back)] = plan["absences"]
            assert 0 < leave < back < 120.0
    assert plans == client_plans(7, 120.0, ["edge-0", "edge-1"])
    assert plans != client_plans(8, 120.0, ["edge-0", "edge-1"])
