"""What the orders job (``job.py``) must deliver, computed in plain Python from the
produced orders and the batches the checkpoint says Spark ran: every revision of every result.

A micro-batch reads ``[start, end)`` of each partition. Its on-time orders are those whose event time is
above the watermark the batch filtered late rows with; an orderId counts once, at its first on-time
occurrence in Kafka order (repeats share the key, so the partition, and come later). A batch updates the
(window, region) results its new orders fall in (sliding windows: every window containing the order), and
the revision of such a result is its value over every counted order up to and including that batch.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from sparkwire.replaylog import Entry
from sparkwire.spark import BatchInput, read_history

Revisions = dict[int, dict[tuple[str, str], "Revision"]]
"""batch id -> (windowStart, region) -> the revision of that result the batch delivers."""


@dataclass(frozen=True)
class Order:
    partition: int
    offset: int
    order_id: str
    region: str
    amount: Decimal
    ts_ms: int


@dataclass(frozen=True)
class Revision:
    window_start: str
    window_end: str
    region: str
    orders: int
    revenue: str
    largest: str


def cents(amount: Decimal) -> str:
    """As Spark prints a decimal of scale 2 (``revenue`` decimal(22,2), ``largestOrder`` decimal(12,2))."""
    return str(amount.quantize(Decimal("0.01")))


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def windows_of(ts_ms: int, window_ms: int, slide_ms: int) -> list[tuple[int, int]]:
    last_start = ts_ms - ts_ms % slide_ms
    return [(start, start + window_ms) for start in range(last_start - window_ms + slide_ms, last_start + 1, slide_ms)
            if start <= ts_ms < start + window_ms]


def expected_revisions(orders: list[Order], batches: list[BatchInput], window_ms: int, slide_ms: int) -> Revisions:
    """What each of ``batches`` must deliver."""
    seen: set[str] = set()
    totals: dict[tuple[int, str], list[Decimal]] = defaultdict(list)
    revisions: Revisions = {}
    for batch in batches:
        updated: set[tuple[int, str]] = set()
        read = sorted((o for o in orders
                       if batch.start.get(o.partition, 0) <= o.offset < batch.end.get(o.partition, 0)),
                      key=lambda o: (o.partition, o.offset))
        for order in read:
            if order.ts_ms <= batch.late_watermark_ms or order.order_id in seen:
                continue
            seen.add(order.order_id)
            for start, _end in windows_of(order.ts_ms, window_ms, slide_ms):
                totals[(start, order.region)].append(order.amount)
                updated.add((start, order.region))
        revisions[batch.batch_id] = {
            (iso(start), region): Revision(iso(start), iso(start + window_ms), region, len(totals[(start, region)]),
                                           cents(sum(totals[(start, region)], Decimal(0))),
                                           cents(max(totals[(start, region)])))
            for start, region in updated}
    return revisions


def committed_batches(checkpoint: Path, topic: str) -> list[BatchInput]:
    """The batches the job's checkpoint says are done (their results are in the log)."""
    history = read_history(checkpoint, topic)
    return [b for b in history.batches if b.batch_id <= history.committed]


def delivered_revisions(entries: Iterable[Entry]) -> tuple[Revisions, list[str]]:
    """The log's entries as revisions by batch, and what is wrong with them: an entry id that is not
    ``<processingId>@<revision>``, a key that is not the region, two entries of one revision, or a result's
    revision going down in seq order (an older value after a newer one)."""
    found: Revisions = {}
    problems: list[str] = []
    newest: dict[str, int] = {}
    for entry in entries:
        data = json.loads(entry.data)
        if entry.processing_id != f"{data['processingId']}@{data['revision']}" or entry.key != data["region"]:
            problems.append(f"seq {entry.seq}: id {entry.processing_id} / key {entry.key} do not match {data}")
        if data["revision"] <= newest.get(data["processingId"], -1):
            problems.append(f"seq {entry.seq}: revision {data['revision']} after {newest[data['processingId']]}")
        newest[data["processingId"]] = data["revision"]
        revision = Revision(data["windowStart"], data["windowEnd"], data["region"], data["orders"], data["revenue"],
                            data["largestOrder"])
        batch = found.setdefault(data["revision"], {})
        if (revision.window_start, revision.region) in batch:
            problems.append(f"seq {entry.seq}: a second revision {data['revision']} of one result")
        batch[(revision.window_start, revision.region)] = revision
    return found, problems


def differences(found: Revisions, expected: Revisions, batches: Iterable[int] | None = None) -> list[str]:
    """Every revision delivered but not expected, expected but not delivered, or with other values."""
    lines = []
    for batch in sorted(set(found) | set(expected) if batches is None else batches):
        got, want = found.get(batch, {}), expected.get(batch, {})
        for result in sorted(set(got) | set(want)):
            if got.get(result) != want.get(result):
                lines.append(f"batch {batch} {result}: delivered {got.get(result)}, expected {want.get(result)}")
    return lines


def latest(revisions: Revisions) -> dict[tuple[str, str], Revision]:
    """Each result's newest revision."""
    final: dict[tuple[str, str], Revision] = {}
    for batch_id in sorted(revisions):
        final.update(revisions[batch_id])
    return final


def expected_final(records: Iterable[dict[str, object]], window_ms: int,
                   slide_ms: int) -> dict[tuple[str, str], Revision]:
    """The newest revision of every result once every record was read and none was late: the orders of
    ``records`` (as sent, repeats and malformed ones included) folded as one batch."""
    sent = list(records)
    orders = [Order(0, offset, str(r["orderId"]), str(r["region"]), Decimal(str(r["amount"])), int(str(r["ts"])))
              for offset, r in enumerate(sent) if "region" in r]
    batch = BatchInput(0, 0, -1, {0: 0}, {0: len(sent)})  # offsets count every record sent, malformed ones too
    return latest(expected_revisions(orders, [batch], window_ms, slide_ms))
