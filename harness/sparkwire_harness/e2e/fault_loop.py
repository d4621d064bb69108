"""A fault injected again and again in the background while the test's traffic keeps flowing."""

from __future__ import annotations

import threading
from collections.abc import Callable


class FaultLoop:
    """Runs ``fault()`` every ``every`` seconds in a thread, between ``__enter__`` and ``__exit__``; ``count``
    says how many ran (a busy machine runs fewer: a fault may wait for what it broke to come back)."""

    def __init__(self, fault: Callable[[], object], every: float) -> None:
        self.fault = fault
        self.every = every
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.fault()
            self.count += 1

    def __enter__(self) -> FaultLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
