"""When the metrics job's sink may close a window: per Kafka partition event-time progress, with idleness.

Kafka orders records only within a partition, and Spark reads partitions unevenly: after a leader failover
or through a backlog, one micro-batch can read many seconds of event time from one partition and only a
few records of another. A single bound taken from the newest event time of the whole batch (what Spark's
watermark is) then closes windows whose events are still unread on the lagging partition, and those events
arrive as late: a window delivered exactly once with part of its events missing.

So the bound follows the slowest partition that still sends:

* a partition's *progress* is the largest event time read from it so far (heartbeats included: the
  producer sends one to every partition);
* a window ``[start, end)`` closes once every *active* partition's progress is at or past ``end + delay``,
  i.e. the closing bound is ``min(progress of the active partitions) - delay`` (windows whose end is at or
  below it close), and it never goes back;
* a partition is *idle* once no batch has read a record from it for ``idle_ms`` of wall-clock time
  (measured from the first batch that read nothing from it, so a batch interval is not counted as silence);
  an idle partition stops holding windows back until it sends again. Without that one silent partition
  (a producer that stopped writing to it) would hold every window open for ever. When every partition is
  idle the newest of them holds: nothing sends, so no window can still be waiting for an event;
* a partition never read from holds nothing back: the sink does not know it exists.

An event whose window has already closed is late: dropped and counted (``closing_sink.py``).

Pure: no Spark, no files, no clock (the caller passes the batch's wall-clock time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

NO_BOUND = -(2**63)  # a closing bound before any event: nothing is closed


@dataclass(frozen=True)
class PartitionProgress:
    event_time_ms: int
    """The largest event time read from the partition."""
    silent_since_ms: int | None = None
    """Wall-clock time of the first batch that read nothing from it after it last sent; None while it sends."""
    idle: bool = False


@dataclass(frozen=True)
class ProgressStep:
    progress: dict[int, PartitionProgress]
    went_idle: list[int]
    """Partitions that became idle in this batch (to be logged once)."""
    resumed: list[int]
    """Idle partitions that sent again in this batch."""


def track_progress(previous: Mapping[int, PartitionProgress], newest_read: Mapping[int, int], now_ms: int,
                   idle_ms: int | None) -> ProgressStep:
    """The partitions' progress after a batch that read records up to ``newest_read[partition]`` (event
    time) from the partitions it names, at wall-clock ``now_ms``. ``idle_ms`` None: no partition ever
    becomes idle."""
    progress: dict[int, PartitionProgress] = {}
    went_idle: list[int] = []
    resumed: list[int] = []
    for partition in sorted(set(previous) | set(newest_read)):
        before = previous.get(partition)
        if partition in newest_read:
            newest = newest_read[partition] if before is None else max(before.event_time_ms, newest_read[partition])
            progress[partition] = PartitionProgress(newest)
            if before is not None and before.idle:
                resumed.append(partition)
            continue
        assert before is not None
        silent_since = now_ms if before.silent_since_ms is None else before.silent_since_ms
        idle = before.idle or (idle_ms is not None and now_ms - silent_since >= idle_ms)
        if idle and not before.idle:
            went_idle.append(partition)
        progress[partition] = replace(before, silent_since_ms=silent_since, idle=idle)
    return ProgressStep(progress, went_idle, resumed)


def closing_bound(progress: Mapping[int, PartitionProgress], delay_ms: int, previous_bound: int = NO_BOUND) -> int:
    """The event time at or below which windows (by their end) are closed: ``min(progress of the active
    partitions) - delay``, the newest partition's when all are idle, never below ``previous_bound``."""
    active = [p.event_time_ms for p in progress.values() if not p.idle]
    if active:
        return max(previous_bound, min(active) - delay_ms)
    if progress:
        return max(previous_bound, max(p.event_time_ms for p in progress.values()) - delay_ms)
    return previous_bound
