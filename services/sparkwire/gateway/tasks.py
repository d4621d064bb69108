"""Ending the tasks a connection or a pod owns, even when a cancellation gets lost on the way.

On Python 3.11, ``asyncio.wait_for`` returns the inner result instead of raising when a cancel arrives
just as that result is ready (CPython gh-86296, fixed in 3.12), and redis-py wraps every socket write in
``wait_for`` when a socket timeout is set. A task cancelled at that moment keeps running: a connection
whose sender swallowed its cancel streamed on after a protocol error, never closed, and held the pod's
shutdown. So a task still running after a cancel is cancelled again until it ends, and the gateway's own
code uses ``asyncio.timeout``, which does not lose cancels.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

# How long to wait for cancelled tasks before cancelling the ones still running again.
RECANCEL_AFTER_S = 0.05


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and return once every one has ended; their exceptions are retrieved, not raised."""
    owned = list(tasks)
    running = [task for task in owned if not task.done()]
    while running:
        for task in running:
            task.cancel()
        _, still = await asyncio.wait(running, timeout=RECANCEL_AFTER_S)
        running = list(still)
    for task in owned:
        if not task.cancelled():
            task.exception()  # marks it retrieved: the caller decides which results matter
