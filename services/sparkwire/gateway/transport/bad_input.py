"""Bad client input below the protocol (a text frame that is not UTF-8, request headers not in time):
counted one by one, logged at most once per kind per interval."""

from __future__ import annotations

import logging
import time

from sparkwire.gateway import metrics

# How often at most the log gets a line for one kind of bad client input.
BAD_INPUT_LOG_INTERVAL_S = 60.0


class BadInputLog:
    """Bad client input below the protocol, counted one by one (``sparkwire_gateway_bad_input_total``) and
    logged at most once per kind per interval, with how many came since the last line. uvicorn logged a
    traceback for every text frame that was not UTF-8: a client could fill a pod's log at its own pace."""

    def __init__(self, logger: logging.Logger, interval_s: float = BAD_INPUT_LOG_INTERVAL_S) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._logged_at: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def report(self, kind: str, detail: str) -> None:
        metrics.BAD_INPUT.labels(kind=kind).inc()
        now = time.monotonic()
        logged_at = self._logged_at.get(kind)
        if logged_at is not None and now - logged_at < self.interval_s:
            self._unlogged[kind] = self._unlogged.get(kind, 0) + 1
            return
        self._logged_at[kind] = now
        since = self._unlogged.pop(kind, 0)
        self.logger.warning("bad client input %s: %s (%d more of this kind since its last line; all counted in "
                            "sparkwire_gateway_bad_input_total)", kind, detail, since)


BAD_INPUT_LOG = BadInputLog(logging.getLogger(__name__))
