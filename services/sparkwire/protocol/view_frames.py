"""The ``entries`` frame of a filtered subscription (docs/protocol.md, "Filtered subscriptions"): it says
which stretch of the log it covers, so a client tells an entry filtered out from one lost.

``{"type": "entries", "epoch", "after", "through", "digest", "entries": [...]}``: the entries listed are
every entry of the log in ``(after, through]`` that the view delivers, in seq order; ``digest`` is that of
the log's entry at ``through`` (the client's cursor after the frame). An item is an entry as in an
unfiltered frame, or a removal ``{"seq", "key", "removed": true}``: the key's revision at ``seq`` stopped
matching the client's filter (update mode). No items: a position frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from sparkwire.protocol.digest import DIGEST
from sparkwire.protocol.encoding import dumps
from sparkwire.protocol.entry_codec import EncodedEntry, ReceivedEntry


@dataclass(frozen=True)
class Removal:
    """The key's newest revision, at ``seq``, no longer matches the client's filter: drop the key (a
    no-op for a client that does not hold it)."""

    seq: int
    key: str


@dataclass(frozen=True)
class ViewEntriesFrame:
    epoch: str
    after: int
    through: int
    digest: str
    items: tuple[ReceivedEntry | Removal, ...]


def removal_json(seq: int, key: str) -> str:
    return f'{{"seq":{seq},"key":{dumps(key)},"removed":true}}'


def _head(epoch: str, after: int, through: int, digest: str) -> str:
    return (f'{{"type":"entries","epoch":{dumps(epoch)},"after":{after},"through":{through},'
            f'"digest":"{digest}","entries":[')


def pack_view_entries(
    epoch: str, after: int, through: int, digest: str, items: Sequence[EncodedEntry], max_frame_bytes: int
) -> list[str]:
    """``items`` (entries and removals encoded once per pod, in seq order, within ``(after, through]``)
    in frames that fit ``max_frame_bytes``; each part covers up to its last item (with that entry's
    digest), the last part up to ``through``. No items: one position frame."""
    frames: list[str] = []
    run: list[str] = []
    size = 0
    overhead = len(_head(epoch, through, through, digest).encode()) + 2  # the longest head of any part
    start = after
    for i, item in enumerate(items):
        if run and overhead + size + 1 + item.nbytes > max_frame_bytes:
            last = items[i - 1]
            frames.append(_head(epoch, start, last.seq, last.digest) + ",".join(run) + "]}")
            start, run, size = last.seq, [], 0
        size += item.nbytes + (1 if run else 0)
        run.append(item.json)
    frames.append(_head(epoch, start, through, digest) + ",".join(run) + "]}")
    return frames


def parse_view_entries(
    document: dict[str, object], epoch: str, parse_entry: Callable[[object], ReceivedEntry],
    bad: Callable[[str], NoReturn],
) -> ViewEntriesFrame:
    """The filtered form of an ``entries`` frame, its promises checked: ``after < through``, items in
    increasing seq order within ``(after, through]``, a digest of the entry at ``through``."""
    after, through, digest = document.get("after"), document.get("through"), document.get("digest")
    for name, value in (("after", after), ("through", through)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            bad(f"entries.{name} must be a non-negative integer, got {value!r:.40}")
    assert isinstance(after, int) and isinstance(through, int)
    if after >= through:
        bad(f"entries covers ({after}, {through}]: after must be below through")
    if not isinstance(digest, str) or not DIGEST.match(digest):
        bad(f"entries.digest must be 16 lowercase hex digits, got {digest!r:.40}")
    raw_items = document.get("entries")
    if not isinstance(raw_items, list):
        bad(f"entries.entries must be a list, got {type(raw_items).__name__}")
    items: list[ReceivedEntry | Removal] = []
    last = after
    for raw in raw_items:
        item = _removal(raw, bad) if isinstance(raw, dict) and "removed" in raw else parse_entry(raw)
        if not last < item.seq <= through:
            bad(f"entries item seq {item.seq} is not in increasing order within ({after}, {through}]")
        last = item.seq
        items.append(item)
    return ViewEntriesFrame(epoch=epoch, after=after, through=through, digest=digest, items=tuple(items))


def _removal(raw: dict[str, object], bad: Callable[[str], NoReturn]) -> Removal:
    seq, key = raw.get("seq"), raw.get("key")
    if raw.get("removed") is not True:
        bad("entries[].removed must be true when present")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        bad(f"entries[].seq must be a non-negative integer, got {seq!r:.40}")
    if not isinstance(key, str):
        bad(f"entries[].key must be a string, got {type(key).__name__}")
    return Removal(seq=seq, key=key)
