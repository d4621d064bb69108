"""Clients connected first, then the test's traffic and faults, then every client caught up with the log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from sparkwire.client import StreamClient


def position(client: StreamClient) -> int:
    """The seq a client is at: its last applied entry, or the snapshot it started from (-1: neither yet)."""
    cursor = client.cursor
    return cursor.seq if cursor is not None else -1


async def run_until_caught_up(
    clients: Sequence[StreamClient], *, ready: Callable[[StreamClient], bool], during: Callable[[], None],
    head: Callable[[], int], ready_timeout: float, catch_up_timeout: float,
    context: Callable[[], object] = lambda: "",
) -> None:
    """Run ``clients`` until each is ``ready``; then ``during()`` (blocking, in a thread: the traffic, the
    faults); then until every client is at ``head()`` (the log's last seq, read after ``during``), and one
    ack interval more so their last acks reach the sessions. ``context()`` is added to a failure's message."""
    tasks = [asyncio.create_task(client.run()) for client in clients]
    try:
        for client in clients:
            await client.wait_until(lambda c=client: ready(c), timeout=ready_timeout)  # type: ignore[misc]
        await asyncio.to_thread(during)
        last = await asyncio.to_thread(head)
        deadline = time.monotonic() + catch_up_timeout
        while time.monotonic() < deadline and not all(position(c) >= last for c in clients):
            await asyncio.sleep(0.2)
        behind = [c for c in clients if position(c) < last]
        assert not behind, (
            f"{len(behind)} clients behind seq {last}; e.g. "
            + "; ".join(f"at {position(c)}: {c.stats()}" for c in behind[:3]) + f"; {context()}"
        )
        await asyncio.sleep(1.5)  # one ack interval
    finally:
        for client in clients:
            await client.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
