"""What Spark's checkpoint of the aggregation query says about its past batches: the Kafka range each
batch read and the watermark it ran with. The rebuild of a lost log recomputes from exactly that.

Spark 4.0's files, as the tests' real checkpoints hold them (the query's ``checkpointLocation``):

* ``metadata``: ``{"id":"<query id>"}``;
* ``offsets/<batchId>``: lines ``v1``, ``{"batchWatermarkMs":…,"batchTimestampMs":…,"conf":{…}}``, then
  one line per source, for the Kafka source ``{"<topic>":{"<partition>":<end offset>,…}}`` (exclusive);
* ``sources/0/0``: a 0 byte, ``v1``, then ``{"<topic>":{"<partition>":<offset>}}``: where batch 0 began;
* ``commits/<batchId>``: written once the batch is done (``v1`` + ``{"nextBatchWatermarkMs":…}``).

``batchWatermarkMs`` of batch *b* is the watermark its stateful operators evict with (a window is emitted
in the first batch whose watermark has reached its end); late rows are filtered with the previous batch's
(``lateness.py`` in ``sparkwire_harness.verify`` models the same rule).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class CheckpointError(RuntimeError):
    pass


@dataclass(frozen=True)
class BatchInput:
    """One micro-batch: it read ``[start[p], end[p])`` of every partition ``p``."""

    batch_id: int
    watermark_ms: int
    late_watermark_ms: int
    start: dict[int, int]
    end: dict[int, int]

    def records(self) -> int:
        return sum(self.end[p] - self.start.get(p, self.end[p]) for p in self.end)


@dataclass(frozen=True)
class QueryHistory:
    query_id: str
    topic: str
    batches: list[BatchInput]
    committed: int
    """The last batch in the commit log (-1 for none)."""
    watermarks: dict[int, int]
    """``batchWatermarkMs`` of every batch in the offsets log (also the first one, whose start is lost)."""

    def upto(self, batch_id: int) -> list[BatchInput]:
        """The known batches below ``batch_id``: the input of everything committed before it (the first
        ones may be missing when Spark purged their offsets files)."""
        if batch_id > 0 and batch_id - 1 not in self.watermarks:
            raise CheckpointError(f"the offsets log has no batch {batch_id - 1}: cannot rebuild up to it")
        return [b for b in self.batches if b.batch_id < batch_id]


def _lines(path: Path) -> list[str]:
    text = path.read_bytes().lstrip(b"\x00").decode()
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != "v1":
        raise CheckpointError(f"{path}: not a v1 metadata log file: {text[:60]!r}")
    return lines[1:]


def _partition_offsets(document: dict[str, dict[str, int]], topic: str, path: Path) -> dict[int, int]:
    if topic not in document:
        raise CheckpointError(f"{path}: no offsets of topic {topic!r} (has {sorted(document)})")
    return {int(partition): int(offset) for partition, offset in document[topic].items()}


def _batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def read_history(checkpoint: str | Path, topic: str) -> QueryHistory:
    """The query's batches from its checkpoint directory: every batch of the offsets log whose start is
    known, the one running included.

    Spark keeps only the last ``spark.sql.streaming.minBatchesToRetain`` (100) offsets files; when older
    ones are purged, the first one left gives only where its successor starts, so the history begins a
    batch later (what came before is treated like input past Kafka's retention)."""
    root = Path(checkpoint)
    metadata = root / "metadata"
    if not metadata.is_file():
        raise CheckpointError(f"{root}: no streaming query checkpoint (no metadata file)")
    query = str(json.loads(metadata.read_text())["id"])
    ids = _batch_ids(root / "offsets")
    if ids and ids != list(range(ids[0], ids[0] + len(ids))):
        raise CheckpointError(f"{root}/offsets: batch ids {ids[:3]}…{ids[-3:]} have a hole")
    batches: list[BatchInput] = []
    start: dict[int, int] | None = None
    previous_watermark = 0
    watermarks: dict[int, int] = {}
    if ids and ids[0] == 0:
        initial = root / "sources" / "0" / "0"
        start = _partition_offsets(json.loads(_lines(initial)[0]), topic, initial)
    for batch_id in ids:
        path = root / "offsets" / str(batch_id)
        header, *sources = _lines(path)
        if len(sources) != 1:
            raise CheckpointError(f"{path}: {len(sources)} sources; sparkwire rebuilds queries of one Kafka source")
        end = _partition_offsets(json.loads(sources[0]), topic, path)
        watermark = int(json.loads(header).get("batchWatermarkMs", 0))
        watermarks[batch_id] = watermark
        if start is not None:
            batches.append(BatchInput(batch_id, watermark, previous_watermark, dict(start), end))
        start = {**(start or {}), **end}
        previous_watermark = watermark
    commits = _batch_ids(root / "commits")
    return QueryHistory(query, topic, batches, commits[-1] if commits else -1, watermarks)

