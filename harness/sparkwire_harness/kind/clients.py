"""Clients through the ingress: ``StreamClient``s, each with the journal of its connections
(``sparkwire_harness.e2e.journal``), connected before a run and run until they caught up with the log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparkwire.client import StreamClient
from sparkwire_harness.e2e.clients import run_until_caught_up
from sparkwire_harness.e2e.journal import ConnectionJournal, record


@dataclass
class Tracked:
    client: StreamClient
    journal: ConnectionJournal

    @property
    def snapshots(self) -> list[int]:
        """The seq of every snapshot it applied (a fresh client starts from one)."""
        return self.journal.snapshots


def tracked_client(url: str, token: str | None) -> Tracked:
    client = StreamClient(url, token=token, keep_applied=True)
    return Tracked(client, record(client))


async def run_clients(count: int, url: str, token: str | None, during: Callable[[], None], head: Callable[[], int],
                      catch_up_timeout: float = 120) -> list[Tracked]:
    """``count`` clients connected first (each has applied its snapshot); then ``during()`` (blocking: traffic
    and faults) runs in a thread; then wait until every client has applied up to ``head()`` (the log's last seq,
    read after)."""
    clients = [tracked_client(url, token) for _ in range(count)]
    journals = {id(tracked.client): tracked.journal for tracked in clients}
    await run_until_caught_up([t.client for t in clients], ready=lambda c: bool(journals[id(c)].snapshots),
                              during=during, head=head, ready_timeout=60, catch_up_timeout=catch_up_timeout)
    return clients
