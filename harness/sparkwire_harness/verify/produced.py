"""The producer's events file read back for the oracle: the records in produced order, with their partitions.

``sparkwire produce --events-file`` writes one JSON line per record Kafka acknowledged, as acknowledged
(``publisher.publish``): its index in the produced order, kind, value and partition, a heartbeat once per
partition. Sorted by index, a partition's lines are in the order Kafka holds them, which is all the
per-partition oracle (``lateness.py``) relies on. A line without a partition (a file written before the
producer recorded them) stands for an unknown partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sparkwire_harness.verify.expected import Produced


@dataclass(frozen=True)
class ProducedLine:
    kind: str
    value: str
    partition: int | None

    @property
    def produced(self) -> Produced:
        """The oracle's input: ``(partition, value)``, or the value alone when the partition is unknown."""
        return self.value if self.partition is None else (self.partition, self.value)


def read_produced(paths: Path | Iterable[Path]) -> list[ProducedLine]:
    """The records of one events file, or of several produced one after another, in produced order."""
    lines: list[ProducedLine] = []
    for path in [paths] if isinstance(paths, Path) else paths:
        documents = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        # sorted() is stable: a heartbeat's copies (one index) keep their acknowledgement order.
        documents.sort(key=lambda document: int(document.get("index", 0)))
        lines += [ProducedLine(str(d["kind"]), str(d["value"]), d.get("partition")) for d in documents]
    return lines


def oracle_input(lines: Iterable[ProducedLine]) -> list[Produced]:
    """The records as :func:`~sparkwire_harness.verify.expected.expected_outcome` takes them."""
    return [line.produced for line in lines]
