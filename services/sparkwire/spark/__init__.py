"""``sparkwire.spark``: deliver any PySpark Structured Streaming query exactly once to browsers.

The public API (docs/deliver-your-own-query.md) is what this module exports; its sub-packages are internal::

    from sparkwire.spark import KafkaSource, SourceQuery, Target, deliver, drop_duplicates

    query = SourceQuery(source=KafkaSource("kafka:9092", "orders"), events=parse_orders,
                        event_time="eventTime", watermark_delay_ms=5_000, query=revenue_per_region)
    deliver(query, stream="orders", key="region", mode="update", id_from=("windowEnd", "region"),
            event_time="windowEnd", window=("windowStart", "windowEnd"), spark=spark)

Its parts:

* ``delivery/``: ``deliver`` and its ``foreachBatch`` sink (one micro-batch -> one exactly-once commit), and
  the crash points of the fault-injection tests;
* ``results/``: what a query's results become: the checks its plan passes before it starts, the encoding of
  its rows as JSON, the records the log commits;
* ``rebuild/``: a lost replay log recomputed from Kafka and the query's checkpoint;
* ``runtime/``: a delivery run as a driver process (``main``, the SparkSession, query progress);
* ``stream.py`` (what a delivered stream is), ``source.py`` (the query with its Kafka source),
  ``metrics.py`` (the driver's Prometheus metrics) and ``types.py``: what the parts share.

Beyond the guide's names (``deliver``, ``deliver_job``, ``foreach_batch``, ``main``, ``Job``, ``Target``,
``SourceQuery``, ``KafkaSource``, ``drop_duplicates``, ``StreamSpec``, ``ReplayLogSink``, ``DeliveryError``,
``UnencodableSchema``), it exports what a job that brings a sink and a process of its own needs (the built-in
metrics job, ``sparkwire.aggregator``, imports nothing else of this package): ``start`` (a query with a given
sink), ``AVAILABLE``, ``ResultEncoder``, ``HistoryRebuilder``, ``FaultInjector``, ``metrics``; the driver's
runtime (``add_runtime_arguments``, ``add_placement_arguments``, ``session``, ``serve``, ``stop_on_signals``,
``load_job``, ``rebuild_job``, ``QUICK_JIT``, ``ProgressReporter``, ``DEADLETTER_QUERY``,
``DEADLETTER_OBSERVATION``); and what a query's checkpoint says about its past batches (``read_history``,
``QueryHistory``, ``BatchInput``, ``replan_unrunnable_batch``; an example's own oracle of its results reads
it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkwire.spark import metrics
from sparkwire.spark.delivery.deliver import AVAILABLE, Job, Target, deliver, deliver_job, foreach_batch, start
from sparkwire.spark.delivery.faults import FaultInjector
from sparkwire.spark.delivery.sink import ReplayLogSink
from sparkwire.spark.rebuild.checkpoint import BatchInput, QueryHistory, read_history, replan_unrunnable_batch
from sparkwire.spark.rebuild.rebuilder import HistoryRebuilder
from sparkwire.spark.results.encoding import UnencodableSchema
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.runtime.main import (
    add_placement_arguments,
    add_runtime_arguments,
    load_job,
    main,
    serve,
    session,
    stop_on_signals,
)
from sparkwire.spark.runtime.main import rebuild as rebuild_job  # ``rebuild`` names the rebuild/ sub-package
from sparkwire.spark.runtime.session import QUICK_JIT
from sparkwire.spark.source import KafkaSource, SourceQuery, drop_duplicates
from sparkwire.spark.stream import DeliveryError, StreamSpec

if TYPE_CHECKING:
    from sparkwire.spark.runtime.progress import DEADLETTER_OBSERVATION, DEADLETTER_QUERY, ProgressReporter

# runtime/progress.py imports pyspark: its names load on first use, so that importing sparkwire.spark loads no
# pyspark (what a job's driver and the ``sparkwire`` command imported lazily before).
_PROGRESS = ("DEADLETTER_OBSERVATION", "DEADLETTER_QUERY", "ProgressReporter")


def __getattr__(name: str) -> Any:
    if name in _PROGRESS:
        from sparkwire.spark.runtime import progress

        return getattr(progress, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The guide's names (docs/reference/spark.md renders them) and the others the docstring names.
__all__ = [
    "AVAILABLE",
    "DEADLETTER_OBSERVATION",
    "DEADLETTER_QUERY",
    "QUICK_JIT",
    "BatchInput",
    "DeliveryError",
    "FaultInjector",
    "HistoryRebuilder",
    "Job",
    "KafkaSource",
    "ProgressReporter",
    "QueryHistory",
    "ReplayLogSink",
    "ResultEncoder",
    "SourceQuery",
    "StreamSpec",
    "Target",
    "UnencodableSchema",
    "add_placement_arguments",
    "add_runtime_arguments",
    "deliver",
    "deliver_job",
    "drop_duplicates",
    "foreach_batch",
    "load_job",
    "main",
    "metrics",
    "read_history",
    "rebuild_job",
    "replan_unrunnable_batch",
    "serve",
    "session",
    "start",
    "stop_on_signals",
]
