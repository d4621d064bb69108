"""Which events the aggregator drops as late, decided from the produced order alone (no Spark).

The contract (docs/replay-log.md, "When a window closes"): a window ``[start, end)`` closes once every
active Kafka partition's event-time progress (the largest event time read from it) has reached
``end + delay``; an event of a closed window is late. Kafka keeps the order of each partition, not across
partitions, and Spark reads partitions unevenly (a backlog, a leader failover), so the oracle reasons per
partition, from the records produced to each one (heartbeats go to every partition):

* on time: its timestamp is above ``newest(p) - delay``, ``newest(p)`` the largest timestamp produced to
  its own partition ``p`` before it. Every record of ``p`` read before it was produced before it, so ``p``'s
  progress is at most ``newest(p)`` and no window of this event can have closed, however far the other
  partitions were read ahead — provided ``p`` never went idle (the producer sends to every partition
  within the job's idle time: heartbeats do) and no partition is read further ahead of another than the
  job's ``--partition-skew-ms`` (Spark's own, global, watermark keeps rows that far behind);
* late: its window's end is at or below ``newest(q) - delay - margin`` for *every* partition ``q`` produced
  to so far, and at least ``margin`` of event time was produced before it, where ``margin`` bounds how much
  event time a couple of micro-batches span and how far apart the partitions are read (the caller knows
  its trigger, batch size and that it lets no partition lag while it produces late events): every
  partition has then been read past the window's end + delay, so it has closed;
* anything between is ambiguous: :class:`AmbiguousLateness`, since a test on such input could pass or
  fail by the timing of batches.

Without a margin (``None``) no event may be behind its partition's newest by more than the delay.
Records whose partition is not known are all taken as one partition's (the produced order then stands for
the read order, which is what a caller that does not know the partitions can claim).

This is the oracle's own statement of the rule: it shares no code with the sink's.
"""

from __future__ import annotations

UNKNOWN_PARTITION = -1


class AmbiguousLateness(ValueError):
    pass


class LatenessModel:
    def __init__(self, delay_ms: int, margin_ms: int | None, window_ms: int = 1) -> None:
        if delay_ms < 0 or (margin_ms is not None and margin_ms < 0) or window_ms < 1:
            raise ValueError("delay_ms and margin_ms must be >= 0, window_ms >= 1")
        self.delay_ms = delay_ms
        self.margin_ms = margin_ms
        self.window_ms = window_ms
        self.first: int | None = None
        self.newest_by_partition: dict[int, int] = {}

    @property
    def newest(self) -> int | None:
        """The largest timestamp produced to any partition."""
        return max(self.newest_by_partition.values(), default=None)

    def advance(self, timestamp: int, partition: int = UNKNOWN_PARTITION) -> None:
        """Record a timestamp that moves a partition's event time (an event or a heartbeat sent there) after
        deciding on it."""
        self.first = timestamp if self.first is None else self.first
        before = self.newest_by_partition.get(partition)
        self.newest_by_partition[partition] = timestamp if before is None else max(before, timestamp)

    def closed_upto(self) -> int | None:
        """Windows whose end is at or below this are closed once every partition has been read to the end of
        what was produced to it: the slowest partition's newest minus the delay."""
        if not self.newest_by_partition:
            return None
        return min(self.newest_by_partition.values()) - self.delay_ms

    def is_late(self, timestamp: int, partition: int = UNKNOWN_PARTITION) -> bool:
        own = self.newest_by_partition.get(partition)
        if own is None or timestamp > own - self.delay_ms:
            return False
        margin = self.margin_ms
        window_end = timestamp - timestamp % self.window_ms + self.window_ms
        slowest = min(self.newest_by_partition.values())
        newest, first = self.newest, self.first
        assert newest is not None and first is not None
        if margin is not None and window_end <= slowest - self.delay_ms - margin and newest - first >= margin:
            return True
        raise AmbiguousLateness(
            f"event time {timestamp} (partition {partition}) is behind its partition's newest {own} by "
            f"{own - timestamp} ms: more than the delay {self.delay_ms}, but its window (end {window_end}) is not "
            f"clearly behind every partition's newest (the slowest {slowest}) by delay + margin ({margin}), or it "
            "is too early in the stream; the job may or may not drop it"
        )
