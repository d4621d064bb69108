"""The metrics job's sink: aggregates each micro-batch per window, closes windows, commits the closed ones.

:class:`WindowClosingSink` is the generic :class:`~sparkwire.spark.ReplayLogSink` (exactly-once commit,
fencing, rebuild) with its own way from a batch to records: the batch's deduplicated events aggregated in
Spark (``pipeline.batch_partials``, that batch alone), merged into the open windows
(``windows.OpenWindows``), the windows the batch closes encoded as the metrics job's results. The open windows
and each Kafka partition's event-time progress after each batch are written to the checkpoint
(``window_state.py``) before the batch is committed. A window closes once every active partition has passed
its end + delay (``partition_progress.py``); events of a window already closed are late: dropped, counted
(``sparkwire_aggregator_late_events_total``) and logged.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from prometheus_client import Counter

from sparkwire.aggregator import pipeline
from sparkwire.aggregator.window_state import WindowStateFiles
from sparkwire.aggregator.windows import OpenWindows, partial_from_row
from sparkwire.replaylog import Record
from sparkwire.spark import ReplayLogSink, metrics

log = logging.getLogger(__name__)

LATE_EVENTS = Counter(
    "sparkwire_aggregator_late_events",
    "Events of windows the sink had already closed (every active partition past the window's end + delay), "
    "dropped as late",
)


class WindowClosingSink(ReplayLogSink):
    # Its rebuild publishes the windows its state files have closed, which its first batch reads; its
    # heartbeat source runs that batch within a second of the start, so a lost log is rebuilt there.
    rebuild_before_start = False

    def __init__(self, *args: Any, states: WindowStateFiles, idle_ms: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.states = states
        self.idle_ms = idle_ms  # None: a partition that reads nothing holds windows back for ever
        self.clock = time.time  # the wall clock idleness is measured on (a test's own)
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
        # A re-run of a batch whose state was saved (and so may be in the log) decides at the same time.
        now_ms = self.states.recorded_wall_ms(batch_id, query_id)
        if now_ms is None:
            now_ms = int(self.clock() * 1000)
        advanced = state.advance((partial_from_row(row.asDict()) for row in rows), now_ms=now_ms,
                                 idle_ms=self.idle_ms)
        for partition in advanced.went_idle:
            progress = state.partitions[partition]
            log.warning("Kafka partition %d read nothing for %d ms: idle, it no longer holds windows open",
                        partition, self.idle_ms, extra={"fields": {
                            "event": "partition_idle", "batchId": batch_id, "partition": partition,
                            "eventTimeMs": progress.event_time_ms, "closedUpto": state.closed_upto}})
        for partition in advanced.resumed:
            log.info("Kafka partition %d sends again: it holds windows open again", partition, extra={"fields": {
                "event": "partition_resumed", "batchId": batch_id, "partition": partition}})
        if advanced.after_close:
            metrics.WINDOW_ROWS_AFTER_CLOSE.inc(advanced.after_close)
            LATE_EVENTS.inc(advanced.late_events)
            log.warning("events of windows already closed reached the sink: dropped as late", extra={"fields": {
                "event": "late_events", "batchId": batch_id, "rows": advanced.after_close,
                "events": advanced.late_events, "closedUpto": state.closed_upto}})
        self.states.save(batch_id, query_id, state, wall_ms=now_ms)
        self._proposed = (batch_id, state)
        encoded = self.encoder.encode(advanced.closed, revision=batch_id)
        return encoded.records

    def batch_committed(self, batch_id: int) -> None:
        assert self._proposed is not None and self._proposed[0] == batch_id
        self._state_batch, self._state = self._proposed
        self._proposed = None
