"""cancel_and_wait ends tasks that lose a cancel, which asyncio.wait_for does on Python 3.11."""

from __future__ import annotations

import asyncio

from sparkwire.gateway.tasks import cancel_and_wait


async def _swallows_first_cancel(progress: list[str]) -> None:
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        progress.append("swallowed")  # as wait_for does when its inner result is ready at the cancel
    progress.append("running on")
    await asyncio.sleep(10)


def test_a_task_that_swallows_a_cancel_still_ends() -> None:
    async def scenario() -> list[str]:
        progress: list[str] = []
        task = asyncio.create_task(_swallows_first_cancel(progress))
        await asyncio.sleep(0)
        async with asyncio.timeout(2):
            await cancel_and_wait([task])
        assert task.done()
        return progress

    assert asyncio.run(scenario()) == ["swallowed", "running on"]


def test_exceptions_of_ended_tasks_are_retrieved_not_raised() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    async def scenario() -> None:
        task = asyncio.create_task(fails())
        await asyncio.sleep(0)
        await cancel_and_wait([task])
        assert isinstance(task.exception(), ValueError)

    asyncio.run(scenario())
