"""Clients through the ingress: ``StreamClient``s, each with the journal of its connections
(``sparkwire_harness.e2e.journal``), connected before a run and run until they caught up with the log; some
with a filtered view (``views.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sparkwire.client import StreamClient
from sparkwire_harness.e2e.clients import run_until_caught_up
from sparkwire_harness.e2e.journal import ConnectionJournal, record

from .views import ClientView


@dataclass
class Tracked:
    client: StreamClient
    journal: ConnectionJournal
    view: ClientView | None = None  # None: the whole stream

    @property
    def snapshots(self) -> list[int]:
        """The seq of every snapshot it applied (a fresh client starts from one)."""
        return self.journal.snapshots


def tracked_client(url: str, token: str | None, view: ClientView | None = None) -> Tracked:
    client = StreamClient(url, token=token, keep_applied=True, filter=view.filter if view else None)
    return Tracked(client, record(client), view)


async def run_clients(count: int, url: str, token: str | None, during: Callable[[], None], head: Callable[[], int],
                      catch_up_timeout: float = 120, *, views: Sequence[ClientView] = (),
                      tenant_token: str | None = None) -> list[Tracked]:
    """``count`` clients and one more per view in ``views`` (a scoped view with ``tenant_token``) connected
    first (each has applied its snapshot); then ``during()`` (blocking: traffic and faults) runs in a thread;
    then wait until every client is at ``head()`` (the log's last seq, read after; a filtered client's
    position moves past the entries its view leaves out)."""
    clients = [tracked_client(url, token) for _ in range(count)]
    clients += [tracked_client(url, tenant_token if view.scoped else token, view) for view in views]
    journals = {id(tracked.client): tracked.journal for tracked in clients}
    await run_until_caught_up([t.client for t in clients], ready=lambda c: bool(journals[id(c)].snapshots),
                              during=during, head=head, ready_timeout=60, catch_up_timeout=catch_up_timeout)
    return clients
