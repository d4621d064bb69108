"""Each connection of a test client, as it saw it: the welcome's reset, the snapshot parts, and how it ended.

A fresh client has no position until it applies a whole snapshot (docs/protocol.md: a half snapshot is no
state at all), so a connection that ends before its snapshot's last part leaves the client as fresh as it
was, and its next hello gets ``no_position`` again. That is the protocol's promise, not a lost cursor or
session. ``unexplained_resets`` tells the two apart: every ``no_position`` but the one whose snapshot was
applied must belong to a connection that ended before its snapshot was whole, and after the applied
snapshot every connection must resume (a reset there means a cursor or session was lost).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkwire.client import StreamClient


@dataclass
class ConnectionRecord:
    """One connection that reached the server (its hello was sent)."""

    reset: str | None = None  # the welcome's reset; None when it resumed or no welcome came
    welcomed: bool = False
    snapshot_parts: int = 0
    applied_snapshot: int | None = None  # the seq of the snapshot it completed
    ended_with: dict[int, int] = field(default_factory=dict)  # close codes counted until the next hello

    def describe(self) -> str:
        snapshot = (f"snapshot {self.applied_snapshot} applied" if self.applied_snapshot is not None
                    else f"{self.snapshot_parts} snapshot part(s), none whole")
        welcome = f"welcome reset={self.reset}" if self.welcomed else "no welcome"
        return f"{welcome}, {snapshot}, then closes {self.ended_with or 'none yet'}"


@dataclass
class ConnectionJournal:
    """Fed by the hooks ``record`` puts on a client session: every hello begins a record, every frame the
    session handles updates it, and the close codes the client counted in between close it."""

    closes: Callable[[], dict[int, int]]
    records: list[ConnectionRecord] = field(default_factory=list)
    _closes_seen: Counter[int] = field(default_factory=Counter)

    @property
    def snapshots(self) -> list[int]:
        """The seq of every snapshot applied, in order."""
        return [r.applied_snapshot for r in self.records if r.applied_snapshot is not None]

    def begin(self) -> None:
        self.settle()
        self.records.append(ConnectionRecord())

    def settle(self) -> None:
        """Assign the closes counted since the last call to the latest connection."""
        now = Counter(self.closes())
        if self.records:
            delta = now - self._closes_seen
            for code, count in delta.items():
                self.records[-1].ended_with[code] = self.records[-1].ended_with.get(code, 0) + count
        self._closes_seen = now

    def frame(self, text: str | bytes) -> None:
        if not self.records or not isinstance(text, str):
            return
        head = text[:64]
        if '"welcome"' not in head and '"snapshot"' not in head:
            return
        frame: dict[str, Any] = json.loads(text)
        record = self.records[-1]
        if frame.get("type") == "welcome":
            record.welcomed = True
            record.reset = None if frame.get("recovered") else str(frame.get("reset"))
        elif frame.get("type") == "snapshot":
            record.snapshot_parts += 1
            if not frame.get("more"):
                record.applied_snapshot = int(frame["seq"])


def record(client: StreamClient) -> ConnectionJournal:
    """A journal of ``client``'s connections from now on: its session's ``begin_connection`` (each hello)
    and ``handle`` (each frame) report to it first."""
    journal = ConnectionJournal(lambda: client.stats().closes)
    session = client.session
    handle, begin_connection = session.handle, session.begin_connection

    def handling(text: str | bytes) -> Any:
        reaction = handle(text)
        journal.frame(text)
        return reaction

    def beginning() -> str:
        journal.begin()
        return begin_connection()

    session.handle = handling  # type: ignore[method-assign]
    session.begin_connection = beginning  # type: ignore[method-assign]
    return journal


def unexplained_resets(records: list[ConnectionRecord]) -> list[str]:
    """What in ``records`` the protocol does not explain (empty when all is well): exactly one applied
    snapshot, from a ``no_position`` welcome; every earlier connection a fresh one that ended (with a close
    counted) before its snapshot was whole; every later one resumed."""
    applied = [i for i, record in enumerate(records) if record.applied_snapshot is not None]
    if len(applied) != 1:
        return [f"{len(applied)} snapshots applied, expected exactly 1"]
    first = applied[0]
    problems: list[str] = []
    if records[first].reset != "no_position":
        problems.append(f"connection {first}: its snapshot came with reset {records[first].reset!r}")
    for index, record in enumerate(records[:first]):
        if record.welcomed and record.reset != "no_position":
            problems.append(f"connection {index}, before any snapshot: reset {record.reset!r}")
        if not record.ended_with:
            problems.append(f"connection {index}: replaced before its snapshot with no close counted")
    for index, record in enumerate(records[first + 1:], start=first + 1):
        if record.welcomed and record.reset is not None:
            problems.append(f"connection {index}, after the snapshot at {records[first].applied_snapshot}: "
                            f"reset {record.reset!r} (a lost cursor or session)")
    return problems
