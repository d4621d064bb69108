"""When each order first showed on a client, from the produced orders and the revisions the client received
(``bench/update_latency.py``): pure, so that it has its own tests.

In update mode every micro-batch delivers a new revision of each (window, region) result its orders fall in,
counting every order up to that batch. On a one-partition topic the job reads the orders in their Kafka order,
and an orderId counts once, at its first occurrence (``sparkwire.examples.orders.expected``): so the k-th order
counted in a result is shown by the first revision of that result counting at least k orders. An order is
shown once any of its (sliding) windows shows it. On the page, a revision is shown by the first frame that drew
its seq or a later one (``drawn_at``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import NamedTuple

from sparkwire.examples.orders.expected import Order, iso, windows_of


@dataclass(frozen=True)
class Received:
    """One revision as the client got it: its seq, its result (window end as delivered, region), how many orders
    it counts, when the commit script ran and when the client received it (ms since the epoch)."""

    seq: int
    window_end: str
    region: str
    orders: int
    commit_ms: int
    received_ms: int


@dataclass(frozen=True)
class Shown:
    """One order: its event time (the producer's wall clock when it sent it) and the revision that first
    showed it (None: none did)."""

    ts_ms: int
    first: Received | None


class Spans(NamedTuple):
    """Per order a revision showed (in the orders' order), in ms: sent -> committed, committed -> received
    (or drawn), sent -> received (or drawn)."""

    to_commit: list[int]
    commit_to_received: list[int]
    to_received: list[int]


def spans(shown: Sequence[Shown]) -> Spans:
    """The spans of the orders ``shown``; an order no revision showed has none."""
    firsts = [(s.ts_ms, s.first) for s in shown if s.first is not None]
    return Spans([first.commit_ms - ts for ts, first in firsts],
                 [first.received_ms - first.commit_ms for _, first in firsts],
                 [first.received_ms - ts for ts, first in firsts])


def first_shown(orders: Sequence[Order], received: Sequence[Received], window_ms: int, slide_ms: int) -> list[Shown]:
    """Per counted order (Kafka order, a repeated orderId once), the revision that first showed it."""
    if len({order.partition for order in orders}) > 1:
        raise ValueError("orders from more than one partition: their order in the job is not Kafka order")
    by_result: dict[tuple[str, str], list[Received]] = defaultdict(list)
    for revision in sorted(received, key=lambda r: r.received_ms):
        by_result[(revision.window_end, revision.region)].append(revision)
    counted: dict[tuple[str, str], int] = defaultdict(int)
    seen: set[str] = set()
    shown = []
    for order in sorted(orders, key=lambda o: o.offset):
        if order.order_id in seen:
            continue
        seen.add(order.order_id)
        first: Received | None = None
        for _start, end in windows_of(order.ts_ms, window_ms, slide_ms):
            result = (iso(end), order.region)
            counted[result] += 1
            showing = next((r for r in by_result[result] if r.orders >= counted[result]), None)
            if showing is not None and (first is None or showing.received_ms < first.received_ms):
                first = showing
        shown.append(Shown(order.ts_ms, first))
    return shown


def drawn_at(received: Sequence[Received], frames: Sequence[tuple[int, int]]) -> list[Received]:
    """``received`` as the page showed them: ``received_ms`` replaced by the time of the first frame whose last
    drawn seq is at or after the revision's seq (``frames``: (seq, ms), in drawing order); revisions no frame
    drew are left out. Seqs compare only within one epoch: a page whose last drawn seq went back (a rebuilt log)
    is refused, not misread."""
    if any(later[0] < earlier[0] for earlier, later in pairwise(frames)):
        raise ValueError("the page's last drawn seq went back: more than one epoch, seqs do not compare")
    shown = []
    frame = 0
    for revision in sorted(received, key=lambda r: r.seq):
        while frame < len(frames) and frames[frame][0] < revision.seq:
            frame += 1
        if frame == len(frames):
            break
        shown.append(replace(revision, received_ms=frames[frame][1]))
    return shown
