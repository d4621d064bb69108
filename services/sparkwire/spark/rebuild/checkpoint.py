"""What Spark's checkpoint of the aggregation query says about its past batches: the Kafka range each
batch read and the watermark it ran with. The rebuild of a lost log recomputes from exactly that; and
before a query starts, a last batch planned on offsets Spark would refuse to run is dropped
(``drop_unrunnable_batch``).

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
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


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


def last_committed(checkpoint: str | Path) -> int:
    """The last batch of a checkpoint's commit log; -1 when it has none (a new query)."""
    return (_batch_ids(Path(checkpoint) / "commits") or [-1])[-1]


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



def regressed_partitions(previous: list[str], current: list[str]) -> list[str]:
    """The Kafka partitions whose end offset in ``current`` (a batch's source lines) is below the one in
    ``previous`` (the batch before it), as ``topic-partition previous→current``; pure.

    Spark plans a batch from each partition's latest offset; a broker that still believes it leads a
    partition after the controllers fenced it (cut off from them, clients still reaching it) answers with
    its own high watermark, which can be below what the new leader had already served. Spark writes that
    plan to the offsets log, then refuses to run it (``failOnDataLoss``: "offset was changed from A to
    B") — on every restart too, since a restarted query re-runs the logged plan. Source lines that are
    not Kafka offsets are ignored."""
    regressed: list[str] = []
    for before_line, now_line in zip(previous, current, strict=False):
        before, now = json.loads(before_line), json.loads(now_line)
        if not isinstance(before, dict) or not isinstance(now, dict):
            continue
        for topic, partitions in now.items():
            earlier = before.get(topic)
            if not isinstance(partitions, dict) or not isinstance(earlier, dict):
                continue
            for partition, offset in partitions.items():
                was = earlier.get(partition)
                if isinstance(offset, int) and isinstance(was, int) and 0 <= offset < was:
                    regressed.append(f"{topic}-{partition} {was}→{offset}")
    return regressed


def drop_unrunnable_batch(checkpoint: str | Path) -> tuple[int, list[str]] | None:
    """Remove the offsets log's last batch when it was never committed and its plan went back on a Kafka
    partition (``regressed_partitions``); returns its id and the partitions, or None when there is none.

    Safe: Spark found the regression while planning, before the batch ran, so no output and no state of
    it exists; started again, the query plans that batch afresh from the partitions' latest offsets. Left
    in place, the query would fail on it at every restart, however long ago the broker was healed.
    A checkpoint on a file system this process does not mount (``s3a://``…) is left alone."""
    root = Path(str(checkpoint).removeprefix("file://"))
    offsets = root / "offsets"
    ids = _batch_ids(offsets)
    if len(ids) < 2 or ids[-1] in _batch_ids(root / "commits"):
        return None
    last, before = ids[-1], ids[-2]
    regressed = regressed_partitions(_lines(offsets / str(before))[1:], _lines(offsets / str(last))[1:])
    if not regressed:
        return None
    (offsets / str(last)).unlink()
    (offsets / f".{last}.crc").unlink(missing_ok=True)  # a checksummed file system's companion file
    return last, regressed


def replan_unrunnable_batch(checkpoint: str | Path, query: str) -> None:
    """Before a query starts on ``checkpoint``: ``drop_unrunnable_batch``, said in the log."""
    dropped = drop_unrunnable_batch(checkpoint)
    if dropped is not None:
        batch, partitions = dropped
        log.warning("batch %d was planned on Kafka offsets below the batch before it (%s): planned again",
                    batch, ", ".join(partitions), extra={"fields": {
                        "event": "batch_replanned", "query": query, "batch": batch, "partitions": partitions}})
