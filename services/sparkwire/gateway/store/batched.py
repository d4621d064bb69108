"""Group commit for store round trips: the calls that arrive while one round trip is out share the next.

A connection's handshake makes three store calls (the session lookup, the stream's meta or snapshot, the
"connected" write); one redis-py command costs the pod ~100 µs of CPU however small it is, about a third of a
handshake's cost. When thousands of clients connect at once (a pod killed, a deploy) most of those calls wait
anyway; ``Batched`` sends them as one pipelined call: at most one round trip out per kind, every call that
arrives meanwhile goes in the next. A lone caller still gets its own round trip at once, so nothing waits for
a batch to fill.

It also keeps an ordering the handshake relies on: a read a caller gets *started after* the caller asked (a
call never joins a round trip already out). A connection that subscribed to live before asking therefore
never gets a meta or a snapshot older than its subscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


class Batched(Generic[ItemT, ResultT]):
    """``await batched(item)``: ``call(items)`` answers the items of one round trip, one result per item in
    order; its exception is raised to every caller of that round trip. A cancelled caller only stops
    waiting: its item may still be sent."""

    __slots__ = ("_call", "_task", "_waiting")

    def __init__(self, call: Callable[[list[ItemT]], Awaitable[Sequence[ResultT]]]) -> None:
        self._call = call
        self._waiting: list[tuple[ItemT, asyncio.Future[ResultT]]] = []
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, item: ItemT) -> ResultT:
        future: asyncio.Future[ResultT] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._task is None:
            self._task = asyncio.create_task(self._send())
        return await future

    async def _send(self) -> None:
        batch: list[tuple[ItemT, asyncio.Future[ResultT]]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    results = await self._call([item for item, _ in batch])
                    if len(results) != len(batch):
                        raise RuntimeError(f"{len(results)} results for {len(batch)} items")
                except Exception as error:  # every caller of this round trip gets it
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._task = None
            for _, future in [*batch, *self._waiting]:  # cancelled (the loop closing) with callers waiting
                if not future.done():
                    future.cancel()
            self._waiting = []


def shared(read: Callable[[], Awaitable[ResultT]]) -> Batched[None, ResultT]:
    """``Batched`` for a read that takes no argument: one read answers every caller of its round trip."""

    async def call(items: list[None]) -> list[ResultT]:
        result = await read()
        return [result] * len(items)

    return Batched(call)


__all__ = ["Batched", "shared"]
