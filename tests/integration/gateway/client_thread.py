"""A ``StreamClient`` running in its own thread and event loop, so a test can block it (a stalled browser
tab) or keep it reading in the background while the test's own code blocks."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from sparkwire.client import StreamClient


class ClientThread:
    def __init__(self, url: str, **client_options: Any) -> None:
        self.client: StreamClient | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main(url, client_options)), daemon=True)

    async def _main(self, url: str, client_options: dict[str, Any]) -> None:
        self._loop = asyncio.get_running_loop()
        self.client = StreamClient(url, **client_options)
        self._started.set()
        await self.client.run()

    def start(self) -> ClientThread:
        self._thread.start()
        if not self._started.wait(5):
            raise RuntimeError("client thread did not start")
        return self

    @property
    def last_seq(self) -> int:
        cursor = self.client.cursor if self.client is not None else None
        return cursor.seq if cursor is not None else 0

    def stop(self) -> None:
        if self._loop is not None and self.client is not None and self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.client.stop(), self._loop).result(10)
        self._thread.join(10)
