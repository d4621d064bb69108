"""Turns Spark's query progress into structured logs and Prometheus counters."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent, StreamingQueryListener

from sparkwire.spark import metrics

log = logging.getLogger(__name__)

DEADLETTER_QUERY = "sparkwire-deadletter"
DEADLETTER_OBSERVATION = "deadletter"


def _custom_metric(operator: Any, name: str) -> int:
    values = getattr(operator, "customMetrics", None) or {}
    return int(values.get(name, 0) or 0)


def rows_dropped_by_watermark(progress: Any) -> int:
    """Rows the progress's stateful operators dropped as behind the watermark (each operator filters its own
    input, so a row is counted by the first operator that drops it)."""
    return sum(int(op.numRowsDroppedByWatermark or 0) for op in progress.stateOperators or ())


def query_label(progress: Any) -> str:
    """A query's metrics label: its name, or its id when it has none (a name is what an operator set and
    knows; an unnamed query's id is stable across restarts on the same checkpoint)."""
    return str(progress.name or progress.id)


def offsets_behind(progress: Any) -> int | None:
    """The largest ``maxOffsetsBehindLatest`` over the progress's Kafka sources; None when none reports it
    (the Kafka source reports it once it has fetched the latest offsets)."""
    values = [int(float(source.metrics["maxOffsetsBehindLatest"])) for source in progress.sources or ()
              if (getattr(source, "metrics", None) or {}).get("maxOffsetsBehindLatest") not in (None, "")]
    return max(values) if values else None


class _ProgressAsJson(JStreamingQueryListener):
    """pyspark's bridge rebuilds each progress event from the JVM object field by field: dozens of py4j
    calls, and a class looked up by its simple name for the observed metrics (a search through every jar
    on the classpath), a visible share of a small driver's CPU at short triggers. The event's JSON is one
    call, and parses into the same Python objects."""

    def onQueryProgress(self, jevent: Any) -> None:
        try:
            event = QueryProgressEvent.fromJson(_as_pyspark_reads_it(json.loads(jevent.json())))
        except (KeyError, TypeError, ValueError):  # a field this pyspark needs and this Spark left out
            log.debug("query progress JSON not understood; converting it field by field", exc_info=True)
            event = QueryProgressEvent.fromJObject(jevent)
        self.pylistener.onQueryProgress(event)


def _as_pyspark_reads_it(event: dict[str, Any]) -> dict[str, Any]:
    """Spark's JSON leaves out NaN rates (a source's first batch) and absent offsets; pyspark's ``fromJson``
    requires the keys."""
    for source in event["progress"].get("sources") or ():
        for key in ("startOffset", "endOffset", "latestOffset"):
            source.setdefault(key, None)
        for key in ("inputRowsPerSecond", "processedRowsPerSecond"):
            source.setdefault(key, math.nan)
    return event


class ProgressReporter(StreamingQueryListener):
    @property
    def _jlistener(self) -> Any:  # pyspark's hook: the JVM-side listener wrapping this one
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_ProgressAsJson(self))
        return self._jlistenerobj

    def onQueryStarted(self, event: Any) -> None:
        log.info("query started", extra={"fields": {"event": "query_started", "name": event.name,
                                                      "id": str(event.id), "runId": str(event.runId)}})

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        fields: dict[str, Any] = {
            "event": "query_progress", "name": progress.name, "batchId": progress.batchId,
            "rowsIn": progress.numInputRows, "durationMs": progress.batchDuration,
            "watermark": (progress.eventTime or {}).get("watermark"),
            # Where the batch's time went: latestOffset, getBatch, queryPlanning, addBatch (the plan and
            # the foreachBatch sink), walCommit, commitOffsets, triggerExecution.
            "phasesMs": dict(progress.durationMs or {}),
        }
        behind = offsets_behind(progress)
        if behind is not None:
            metrics.KAFKA_OFFSETS_BEHIND.labels(query=progress.name or "").set(behind)
            fields["kafkaOffsetsBehind"] = behind
        # The dead-letter query observes the malformed records it routes; without one, the metrics query
        # observes those it skips.
        observed = (progress.observedMetrics or {}).get(DEADLETTER_OBSERVATION)
        if observed is not None:
            malformed = int(observed["malformed"] or 0)
            metrics.MALFORMED_RECORDS.inc(malformed)
            fields["malformed"] = malformed
        if progress.name != DEADLETTER_QUERY:  # a delivered query
            metrics.INPUT_ROWS.inc(progress.numInputRows)
            dropped_late = rows_dropped_by_watermark(progress)
            query = query_label(progress)
            metrics.QUERY_INPUT_ROWS.labels(query=query).inc(progress.numInputRows)
            metrics.QUERY_ROWS_DROPPED_BY_WATERMARK.labels(query=query).inc(dropped_late)
            duplicates = sum(
                _custom_metric(op, "numDroppedDuplicateRows") for op in progress.stateOperators
            )
            metrics.LATE_EVENTS.inc(dropped_late)
            metrics.DUPLICATE_EVENTS.inc(duplicates)
            fields.update(lateRowsDropped=dropped_late, duplicateEventsDropped=duplicates,
                          stateRows=sum(op.numRowsTotal for op in progress.stateOperators))
        log.info("query progress", extra={"fields": fields})

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        log.log(logging.ERROR if event.exception else logging.INFO, "query terminated",
                extra={"fields": {"event": "query_terminated", "id": str(event.id),
                                  "exception": event.exception}})
