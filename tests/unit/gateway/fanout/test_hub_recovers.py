"""A stream's hub keeps following after any error of its log, not only Redis's own: it ends only when
cancelled, so a pod never stays unready with a dead reader."""

from __future__ import annotations

import asyncio
import json

import pytest

from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.replaylog.memory import MemoryStreamLog
from sparkwire.replaylog.model import Entry, Record


class FailingOnce(MemoryStreamLog):
    """A memory log whose first follow raises an error no Redis client names (as an unparsable reply)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def follow(self, after_seq: int, count: int, block_ms: int) -> list[Entry]:
        if not self.failed:
            self.failed = True
            raise ValueError("Protocol error, got 'H' as reply type byte")
        return await super().follow(after_seq, count, block_ms)


@pytest.mark.timeout(30)
def test_an_unexpected_error_of_the_log_is_logged_and_the_hub_follows_again(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[bool, bool, int]:
        log = FailingOnce()
        await log.commit([Record("r1", "k1", json.dumps({"n": 1}))])
        hub = StreamHub(log, "s", ring_size=16, block_ms=50)
        task = asyncio.create_task(hub.run())
        try:
            for _ in range(200):
                if hub.head_seq == 1 and hub.healthy:
                    break
                await asyncio.sleep(0.01)
            return log.failed, hub.healthy, hub.head_seq
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    failed, healthy, head = asyncio.run(scenario())
    assert failed and healthy and head == 1
    assert any("hub failed, following again" in r.getMessage() and r.exc_info for r in caplog.records)
