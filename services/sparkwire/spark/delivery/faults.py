"""Crash points for fault-injection tests: SIGKILL the driver at an exact place in a batch.

``SPARKWIRE_FAULT=<point>@<batchId>`` kills the driver the first time ``point`` is reached in a batch
with that id. Points: ``before-commit`` (rows computed, nothing written), ``mid-batch`` (after the
first chunk of the batch was committed), ``after-commit`` (all chunks committed, Spark not yet told).
Unset in production; the check is one comparison per batch.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass

POINTS = ("before-commit", "mid-batch", "after-commit")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fault:
    point: str
    batch_id: int

    @classmethod
    def parse(cls, text: str) -> Fault:
        point, _, batch = text.partition("@")
        if point not in POINTS or not batch.isdigit():
            raise ValueError(f"fault {text!r} must look like <point>@<batchId> with point in {POINTS}")
        return cls(point, int(batch))


class FaultInjector:
    def __init__(self, fault: Fault | None) -> None:
        self.fault = fault

    @classmethod
    def from_env(cls) -> FaultInjector:
        text = os.environ.get("SPARKWIRE_FAULT", "")
        return cls(Fault.parse(text) if text else None)

    def reached(self, point: str, batch_id: int) -> None:
        if self.fault is None or (point, batch_id) != (self.fault.point, self.fault.batch_id):
            return
        log.warning("fault injected: SIGKILL at %s of batch %d", point, batch_id)
        for handler in logging.getLogger().handlers:
            handler.flush()
        # The whole driver (Python and its JVM) when it leads its process group, as a pod kill would.
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
