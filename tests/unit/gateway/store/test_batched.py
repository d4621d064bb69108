from __future__ import annotations

import asyncio

import pytest

from sparkwire.gateway.store.batched import Batched, shared


class Store:
    """Answers each item doubled; each round trip waits for ``release`` when ``hold`` is set."""

    def __init__(self, hold: bool = False) -> None:
        self.round_trips: list[list[int]] = []
        self.release = asyncio.Event()
        if not hold:
            self.release.set()

    async def call(self, items: list[int]) -> list[int]:
        self.round_trips.append(list(items))
        await self.release.wait()
        if any(item < 0 for item in items):
            raise ConnectionError("store down")
        return [item * 2 for item in items]


def test_a_lone_caller_gets_its_own_round_trip() -> None:
    async def run() -> None:
        store = Store()
        batched = Batched(store.call)
        assert await batched(4) == 8
        assert await batched(5) == 10
        assert store.round_trips == [[4], [5]]

    asyncio.run(run())


def test_callers_arriving_while_a_round_trip_is_out_share_the_next_in_order() -> None:
    async def run() -> None:
        store = Store(hold=True)
        batched = Batched(store.call)
        first = asyncio.create_task(batched(1))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert store.round_trips == [[1]]  # out, and waiting for the store
        later = [asyncio.create_task(batched(n)) for n in (2, 3, 4)]
        await asyncio.sleep(0)
        assert store.round_trips == [[1]]  # a round trip already out is never joined
        store.release.set()
        assert await asyncio.gather(first, *later) == [2, 4, 6, 8]
        assert store.round_trips == [[1], [2, 3, 4]]

    asyncio.run(run())


def test_an_error_reaches_every_caller_of_its_round_trip_and_the_next_one_works() -> None:
    async def run() -> None:
        store = Store(hold=True)
        batched = Batched(store.call)
        failing = [asyncio.create_task(batched(n)) for n in (-1, 3)]
        await asyncio.sleep(0)
        store.release.set()
        results = await asyncio.gather(*failing, return_exceptions=True)
        assert [type(r) for r in results] == [ConnectionError, ConnectionError]
        assert await batched(6) == 12

    asyncio.run(run())


def test_a_cancelled_caller_does_not_hold_up_the_others() -> None:
    async def run() -> None:
        store = Store(hold=True)
        batched = Batched(store.call)
        gone = asyncio.create_task(batched(1))
        stays = asyncio.create_task(batched(2))
        await asyncio.sleep(0)
        gone.cancel()
        store.release.set()
        assert await stays == 4
        with pytest.raises(asyncio.CancelledError):
            await gone

    asyncio.run(run())


def test_a_call_answering_the_wrong_number_of_items_is_an_error() -> None:
    async def short(items: list[int]) -> list[int]:
        return items[:-1]

    async def run() -> None:
        batched = Batched(short)
        calls = [asyncio.create_task(batched(n)) for n in (1, 2)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, RuntimeError) for r in results)

    asyncio.run(run())


def test_shared_read_answers_every_caller_of_its_round_trip_with_one_read() -> None:
    reads = 0

    async def read() -> int:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0.01)
        return reads

    async def run() -> None:
        meta = shared(read)
        first = asyncio.create_task(meta(None))
        await asyncio.sleep(0.001)
        assert await asyncio.gather(*(meta(None) for _ in range(5))) == [2] * 5  # the read after the first
        assert await first == 1
        assert reads == 2

    asyncio.run(run())
