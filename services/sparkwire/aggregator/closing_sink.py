"""The metrics job's sink: aggregates each micro-batch per window, closes windows, commits the closed ones.

:class:`WindowClosingSink` is the generic :class:`~sparkwire.spark.sink.ReplayLogSink` (exactly-once commit,
fencing, rebuild) with its own way from a batch to records: the batch's deduplicated events aggregated in
Spark (``pipeline.batch_partials``, that batch alone), merged into the open windows
(``windows.OpenWindows``), the windows the batch closes encoded as the metrics job's results. The open windows
after each batch are written to the checkpoint (``window_state.py``) before the batch is committed.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from sparkwire.aggregator import pipeline
from sparkwire.aggregator.window_state import WindowStateFiles
from sparkwire.aggregator.windows import OpenWindows, partial_from_row
from sparkwire.replaylog import Record
from sparkwire.spark import metrics
from sparkwire.spark.sink import ReplayLogSink

log = logging.getLogger(__name__)


class WindowClosingSink(ReplayLogSink):
    def __init__(self, *args: Any, states: WindowStateFiles, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.states = states
        self._state: OpenWindows | None = None
        self._state_batch = -1  # the batch self._state follows
        self._proposed: tuple[int, OpenWindows] | None = None

    def batch_records(self, batch: Any, batch_id: int) -> list[Record]:
        query_id = self._query_id
        assert query_id is not None
        if self._state is None or self._state_batch != batch_id - 1:
            self._state = self.states.load_before(batch_id, query_id)
            self._state_batch = batch_id - 1
        state = copy.deepcopy(self._state)
        rows = pipeline.batch_partials(batch, self.states.window_ms).collect()  # Kafka, parse, dedup state
        advanced = state.advance(partial_from_row(row.asDict()) for row in rows)
        if advanced.after_close:
            metrics.WINDOW_ROWS_AFTER_CLOSE.inc(advanced.after_close)
            log.error("events of windows already closed reached the sink; dropped", extra={"fields": {
                "event": "window_rows_after_close", "batchId": batch_id, "rows": advanced.after_close}})
        self.states.save(batch_id, query_id, state)
        self._proposed = (batch_id, state)
        encoded = self.encoder.encode(advanced.closed, revision=batch_id)
        return encoded.records

    def batch_committed(self, batch_id: int) -> None:
        assert self._proposed is not None and self._proposed[0] == batch_id
        self._state_batch, self._state = self._proposed
        self._proposed = None
