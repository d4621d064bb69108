"""A ``StreamClient`` in a thread of its own, for synchronous programs (the demo, scripts, tests that
must block without stalling the client)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from sparkwire.client.connection import StreamClient
from sparkwire.client.view import client_filter


class BackgroundClient:
    """``start()`` runs ``StreamClient(url, **options)`` on its own event loop; ``stop()`` ends it."""

    def __init__(self, url: str, **options: Any) -> None:
        client_filter(options.get("filter"), options.get("token"))  # a bad filter raises here, not in the thread
        self._url = url
        self._options = options
        self._client: StreamClient | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True, name=f"stream-client {url}")

    @property
    def client(self) -> StreamClient:
        if self._client is None:
            raise RuntimeError("not started")
        return self._client

    @property
    def last_seq(self) -> int:
        cursor = self._client.cursor if self._client is not None else None
        return cursor.seq if cursor is not None else 0

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._client = StreamClient(self._url, **self._options)
            self._started.set()
            await self._client.run()

        try:
            asyncio.run(run())
        except BaseException as error:  # kept for the caller: a thread's exception has nowhere else to go
            self.error = error
        finally:
            self._started.set()

    def start(self, timeout: float = 5.0) -> BackgroundClient:
        self._thread.start()
        if not self._started.wait(timeout) or self._client is None:
            raise RuntimeError(f"client thread did not start: {self.error!r}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop, client = self._loop, self._client
        if loop is not None and client is not None and self._thread.is_alive():
            # run() returns as soon as stop() signals it, which may end the loop before stop() itself
            # resumes: wait for the thread, not for stop()'s result.
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                asyncio.run_coroutine_threadsafe(client.stop(), loop)
        self._thread.join(timeout)
