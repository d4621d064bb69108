"""The metrics job's open windows after each micro-batch, as files in the query's checkpoint directory.

``<checkpoint>/sparkwire/windows/<batchId>.json``: the :class:`~sparkwire.aggregator.windows.OpenWindows`
after that batch, with the streaming query's id. The sink writes batch N's file *before* it commits batch N
into the replay log, and reads batch N-1's when it starts (or when the batch it gets does not follow the one
it holds). Spark re-runs a batch it did not record as done with the same input, so a file written for a batch
whose commit never happened is written again with the same content; a batch whose commit happened is
re-run from N-1's file and found in the log (replayed): nothing is lost or counted twice. The files live
beside Spark's own state, so a new checkpoint starts with none; Spark keeps 100 batches of offsets, this
keeps ``keep`` files (the rebuild reads each batch's ``closedUpto``).

Each file also holds every Kafka partition's event-time progress (``partition_progress.py``) and the
wall-clock time the batch was decided at (``wallMs``): idleness depends on the clock, so a batch re-run
after a crash takes the time its first run recorded (:meth:`recorded_wall_ms`) and decides the same.
A file from before per-partition progress (no ``partitions``, no ``wallMs``) still loads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sparkwire.aggregator.windows import OpenWindows

DEFAULT_KEEP = 200


class WindowStateMissing(RuntimeError):
    """The checkpoint has batches but not the window state that follows them."""


class WindowStateFiles:
    def __init__(self, checkpoint: str | Path, window_ms: int, delay_ms: int, keep: int = DEFAULT_KEEP) -> None:
        self.directory = Path(checkpoint) / "sparkwire" / "windows"
        self.window_ms = window_ms
        self.delay_ms = delay_ms
        self.keep = keep

    def _path(self, batch_id: int) -> Path:
        return self.directory / f"{batch_id}.json"

    def load_before(self, batch_id: int, query_id: str) -> OpenWindows:
        """The open windows after batch ``batch_id - 1`` (none before batch 0)."""
        if batch_id == 0:
            return OpenWindows(self.window_ms, self.delay_ms)
        path = self._path(batch_id - 1)
        try:
            document = json.loads(path.read_text())
        except FileNotFoundError:
            raise WindowStateMissing(
                f"{path} is missing: the checkpoint has batches up to {batch_id - 1} but not the metrics job's "
                "open windows after them (a checkpoint written by a sparkwire whose Spark query aggregated the "
                "windows itself, or files removed by hand). Start the job on a new checkpoint directory; "
                "`sparkwire rebuild` restores the log's history from Kafka") from None
        if document.get("queryId") != query_id:
            raise WindowStateMissing(f"{path} belongs to query {document.get('queryId')}, not {query_id}")
        state = OpenWindows.from_document(document)
        if (state.window_ms, state.delay_ms) != (self.window_ms, self.delay_ms):
            raise WindowStateMissing(
                f"{path} holds windows of {state.window_ms} ms with a {state.delay_ms} ms delay; the job now has "
                f"{self.window_ms} ms and {self.delay_ms} ms: start it on a new checkpoint directory")
        return state

    def recorded_wall_ms(self, batch_id: int, query_id: str) -> int | None:
        """The wall-clock time an earlier run of ``batch_id`` decided it at, if that run saved its state
        (and so may have committed it): a re-run must close the same windows."""
        try:
            document = json.loads(self._path(batch_id).read_text())
        except (FileNotFoundError, ValueError):
            return None
        if document.get("queryId") != query_id or document.get("wallMs") is None:
            return None
        return int(document["wallMs"])

    def save(self, batch_id: int, query_id: str, state: OpenWindows, wall_ms: int | None = None) -> None:
        """Write the state after ``batch_id``, decided at wall-clock ``wall_ms``, atomically (a reader sees
        the old file or the new one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(batch_id)
        temporary = path.with_suffix(".tmp")
        with temporary.open("w") as out:
            document = {"queryId": query_id, "batchId": batch_id, "wallMs": wall_ms, **state.to_document()}
            json.dump(document, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        stale = self._path(batch_id - self.keep)
        stale.unlink(missing_ok=True)

    def closed_upto(self) -> dict[int, int]:
        """Each batch's ``closedUpto`` from the files present: what the rebuild needs."""
        bounds: dict[int, int] = {}
        if not self.directory.is_dir():
            return bounds
        for path in self.directory.glob("*.json"):
            if path.stem.isdigit():
                bounds[int(path.stem)] = int(json.loads(path.read_text())["closedUpto"])
        return bounds
