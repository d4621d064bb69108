"""Which events the aggregator drops as late, decided from the produced order alone (no Spark).

Spark's watermark is not continuous: a micro-batch filters late rows with a watermark computed from the
batches before it (max event time read, minus the delay; before any batch it is 0; the metrics job's
single stateful operator uses the batch's own, a query with two uses the previous batch's). So an event
close to the watermark is late or not depending on where Spark cut the batches, which the oracle cannot
know. Instead the oracle only decides clear cases and refuses the rest:

* on time: its timestamp is above ``newest - delay`` (``newest``: the largest timestamp produced before
  it, heartbeats included), so no watermark Spark can have had reaches it — provided Spark did not read
  records produced after it first by more than the delay's room: a batch reads every partition to its
  end, so through a backlog one partition can be read ahead of another, and the caller keeps the
  producer's disorder plus that skew below the delay;
* late: its timestamp is at or below ``newest - delay - margin`` and at least ``margin`` of event time
  was produced before it, where ``margin`` bounds how much event time a couple of micro-batches span
  (the caller knows its trigger and batch size), so every watermark Spark can have had by then reaches
  it;
* anything between is ambiguous: :class:`AmbiguousLateness`, since a test on such input could pass or
  fail by the timing of batches.

Without a margin (``None``) no event may be behind the newest by more than the delay: the producer's
disorder must stay below it, as in a run with no late events.
"""

from __future__ import annotations


class AmbiguousLateness(ValueError):
    pass


class LatenessModel:
    def __init__(self, delay_ms: int, margin_ms: int | None) -> None:
        if delay_ms < 0 or (margin_ms is not None and margin_ms < 0):
            raise ValueError("delay_ms and margin_ms must be >= 0")
        self.delay_ms = delay_ms
        self.margin_ms = margin_ms
        self.first: int | None = None
        self.newest: int | None = None

    def advance(self, timestamp: int) -> None:
        """Record a timestamp that moves event time (an event or a heartbeat) after deciding on it."""
        self.first = timestamp if self.first is None else self.first
        self.newest = timestamp if self.newest is None else max(self.newest, timestamp)

    def is_late(self, timestamp: int) -> bool:
        if self.newest is None or self.first is None or timestamp > self.newest - self.delay_ms:
            return False
        margin = self.margin_ms
        if margin is not None and timestamp <= self.newest - self.delay_ms - margin \
                and self.newest - self.first >= margin:
            return True
        raise AmbiguousLateness(
            f"event time {timestamp} is behind the newest {self.newest} by {self.newest - timestamp} ms: more "
            f"than the delay {self.delay_ms} but not clearly more than delay + margin ({margin}), or too early "
            "in the stream; Spark may or may not drop it"
        )
