"""The kind tests' connection journal (harness/sparkwire_harness/e2e/journal.py): which no_position resets the protocol
explains (a connection that ended before its snapshot was whole) and which it does not (a lost cursor)."""

from __future__ import annotations

import json

from sparkwire_harness.e2e.journal import ConnectionJournal, ConnectionRecord, unexplained_resets


def welcome(reset: str | None) -> str:
    return json.dumps({"type": "welcome", "recovered": reset is None, "reset": reset})


def snapshot_part(seq: int, more: bool) -> str:
    return json.dumps({"type": "snapshot", "seq": seq, "more": more, "epoch": "e", "items": {}})


def test_the_journal_follows_each_connection_and_the_closes_between_them() -> None:
    closes: dict[int, int] = {}
    journal = ConnectionJournal(lambda: dict(closes))
    journal.begin()
    journal.frame(welcome("no_position"))
    journal.frame(snapshot_part(10, more=True))
    closes[4503] = 1  # the server closed before the last part
    journal.begin()
    journal.frame(welcome("no_position"))
    journal.frame(snapshot_part(12, more=True))
    journal.frame(snapshot_part(12, more=False))
    closes[1006] = 1
    journal.begin()
    journal.frame(welcome(None))
    journal.settle()
    first, second, third = journal.records
    assert (first.reset, first.snapshot_parts, first.applied_snapshot, first.ended_with) == (
        "no_position", 1, None, {4503: 1})
    assert (second.applied_snapshot, second.ended_with) == (12, {1006: 1})
    assert (third.reset, third.welcomed, third.ended_with) == (None, True, {})
    assert unexplained_resets(journal.records) == []


def test_a_reset_after_the_applied_snapshot_is_a_lost_cursor() -> None:
    records = [ConnectionRecord("no_position", True, 2, 12, {1006: 1}),
               ConnectionRecord("no_position", True, 0, None, {1006: 1})]
    assert unexplained_resets(records) == [
        "connection 1, after the snapshot at 12: reset 'no_position' (a lost cursor or session)"]


def test_an_earlier_connection_must_have_ended_and_be_fresh() -> None:
    records = [ConnectionRecord("epoch_mismatch", True, 0, None, {}),
               ConnectionRecord("no_position", True, 1, 12, {})]
    assert unexplained_resets(records) == [
        "connection 0, before any snapshot: reset 'epoch_mismatch'",
        "connection 0: replaced before its snapshot with no close counted"]


def test_exactly_one_snapshot_must_be_applied() -> None:
    assert unexplained_resets([ConnectionRecord("no_position", True, 1, None, {1001: 1})]) == [
        "0 snapshots applied, expected exactly 1"]
    two = [ConnectionRecord("no_position", True, 1, 5, {1006: 1}), ConnectionRecord("no_position", True, 1, 9, {})]
    assert unexplained_resets(two) == ["2 snapshots applied, expected exactly 1"]
