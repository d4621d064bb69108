"""What a correct server sends a filtered subscription, as pure functions (docs/protocol.md, "Filtered
subscriptions"): the gateway runs these on the consecutive runs of the log its ``ReplayMerger`` hands out
(replay, junction and live alike), and the property tests use them as the reference server.

``move_step`` decides one entry for one view: deliver it, tell a removal of its key, or skip it.
``ViewFeed`` turns runs of log entries into frames that each cover ``(after, through]``, each following the
last without a hole, with a position frame at most once per interval while nothing matches.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from sparkwire.protocol.filter_form import Value
from sparkwire.protocol.filter_match import Matcher, compile_filter, match_everything, required_equality
from sparkwire.protocol.items import Entry, StateItem
from sparkwire.protocol.limits import MAX_SERVER_FRAME_BYTES, VIEW_POSITION_INTERVAL_MS
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import EncodedEntry, encode_entry
from sparkwire.protocol.view_frames import pack_view_entries, removal_json

Verdict = Literal["deliver", "remove", "skip"]


@dataclass(frozen=True)
class CompiledView:
    """A view's matchers, built once per distinct view and shared by its clients. ``removals``: the
    stream is in update mode (revisions of a key replace each other), so a key can move out. ``equality``:
    a condition every entry the view delivers meets (``filter_match.required_equality`` of its own filter,
    else of its scope), by which a pod looks the view up for an entry (``view_index``); None: none known."""

    in_scope: Matcher
    own: Matcher
    removals: bool
    equality: tuple[str, frozenset[Value]] | None = None

    def matches(self, key: str, data: object) -> bool:
        return self.in_scope(key, data) and self.own(key, data)


def compile_view(view: View, *, removals: bool) -> CompiledView:
    return CompiledView(
        in_scope=match_everything if view.scope is None else compile_filter(view.scope),
        own=match_everything if view.own is None else compile_filter(view.own),
        removals=removals,
        equality=view_equality(view),
    )


def view_equality(view: View) -> tuple[str, frozenset[Value]] | None:
    """The equality a view's entries meet: its own filter's, else its scope's (both hold for a delivered
    entry; the client's own filter is usually the narrower)."""
    return required_equality(view.own) or required_equality(view.scope)


def move_step(view: CompiledView, previous: bool | None, key: str, data: object) -> tuple[Verdict, bool | None]:
    """One entry of ``key`` for ``view``, given ``previous``: whether the key's last revision *within the
    scope* before this one matched the client's own filter (None: not known, as for the first revision a
    replay meets). Returns the verdict and the ``previous`` for the key's next revision.

    Outside the scope: skipped and never mentioned, not even as a removal (what the scope hides, it hides
    whole). Within it: delivered if it matches; otherwise a removal when the key may be held (its last
    revision matched, or that is not known: a removal of a key the client lacks is a no-op), else skipped.
    In append mode nothing is removed, so nothing is remembered: ``previous`` comes back as it went in,
    and a feed of an append stream keeps no memory per key.
    """
    if not view.in_scope(key, data):
        return "skip", previous
    if not view.removals:
        return ("deliver" if view.own(key, data) else "skip"), previous
    if view.own(key, data):
        return "deliver", True
    if previous is False:
        return "skip", False
    return "remove", False


@dataclass(frozen=True)
class ViewItem:
    entry: Entry
    removed: bool  # a removal of ``entry.key`` at ``entry.seq``, not the entry itself


@dataclass(frozen=True)
class ViewFrame:
    """Every entry of the log in ``(after, through]`` the view delivers (``items``, in seq order);
    ``digest`` is that of the log's entry at ``through``. No items: a position frame."""

    after: int
    through: int
    digest: str
    items: tuple[ViewItem, ...]


def _parsed(entry: Entry) -> object:
    return json.loads(entry.data)


class ViewFeed:
    """One connection's filtered frames, from the position it starts after (its cursor's seq, or the
    snapshot's). ``offer`` takes each run of consecutive log entries the merger hands out; ``due`` a
    position frame when one is due by time; ``flush`` one whatever the time (before a deliberate close).

    ``data_of`` parses an entry's data: a pod passes its cache, so each entry is parsed once, not once
    per client. ``previous`` (key -> whether its last revision in scope matched) may be shared by the
    feeds of one view at the same position; a key it lacks is unknown (a removal, a no-op if not held).
    It is kept in update mode only, so it holds at most one flag per key of the stream seen since the
    feed began (the keys a client's state holds anyway); an append stream's feed holds none.
    """

    def __init__(
        self, view: CompiledView, after: int, *, now_ms: int, interval_ms: int = VIEW_POSITION_INTERVAL_MS,
        data_of: Callable[[Entry], object] = _parsed, previous: dict[str, bool] | None = None,
    ) -> None:
        self.view = view
        self.sent = after  # the ``through`` of the last frame sent (or the start position)
        self.seen = after  # the last seq of the log evaluated
        self._seen_digest = ""
        self._interval_ms = interval_ms
        self._last_frame_ms = now_ms
        self._data_of = data_of
        self.previous: dict[str, bool] = {} if previous is None else previous

    def offer(self, run: Sequence[Entry], now_ms: int) -> list[ViewFrame]:
        """The frames for ``run``: entries that must follow ``seen`` without a hole (``ValueError``
        otherwise: the merger's job is to hand out nothing else)."""
        if not run:
            return self.due(now_ms)
        if run[0].seq != self.seen + 1 or any(b.seq != a.seq + 1 for a, b in itertools.pairwise(run)):
            raise ValueError(f"run {run[0].seq}..{run[-1].seq} does not follow seq {self.seen} without a hole")
        items: list[ViewItem] = []
        for entry in run:
            verdict, previous = move_step(self.view, self.previous.get(entry.key), entry.key, self._data_of(entry))
            if previous is not None:
                self.previous[entry.key] = previous
            if verdict != "skip":
                items.append(ViewItem(entry, removed=verdict == "remove"))
        return self.advance(tuple(items), run[-1], now_ms)

    def advance(self, items: tuple[ViewItem, ...], last: Entry, now_ms: int) -> list[ViewFrame]:
        """The frames for a run of the log that follows ``seen`` without a hole and ends at ``last``, whose
        items this view delivers are ``items`` — evaluated once for every feed of the view (``view_items``),
        which only an append stream allows: there a run's items depend on the run and the view alone."""
        frame = self.next_frame(items, last, now_ms)
        self.seen, self._seen_digest = last.seq, last.digest
        if frame is None:
            return []
        self.sent, self._last_frame_ms = frame.through, now_ms
        return [frame]

    def next_frame(self, items: tuple[ViewItem, ...], last: Entry, now_ms: int) -> ViewFrame | None:
        """The frame ``advance(items, last, now_ms)`` returns, without taking it (a pod writes it first):
        one with the items, or a position frame when one is due by time, else None."""
        if self.frame_due(items, now_ms):
            return ViewFrame(after=self.sent, through=last.seq, digest=last.digest, items=items)
        return None

    def frame_due(self, items: tuple[ViewItem, ...], now_ms: int) -> bool:
        """Whether ``advance`` with ``items`` at ``now_ms`` makes a frame (``next_frame`` is not None)."""
        return bool(items) or now_ms - self._last_frame_ms >= self._interval_ms

    def passed(self, last: Entry, now_ms: int, *, framed: bool) -> None:
        """What ``advance`` does to the feed, for a pod that wrote the frame itself (or none, ``framed``
        False, when ``frame_due`` said so): the frame's bytes are shared by the view's connections at the
        same position, so no connection builds its own ``ViewFrame`` for them."""
        self.seen, self._seen_digest = last.seq, last.digest
        if framed:
            self.sent, self._last_frame_ms = last.seq, now_ms

    def due(self, now_ms: int) -> list[ViewFrame]:
        if self.seen > self.sent and now_ms - self._last_frame_ms >= self._interval_ms:
            return [self._frame((), now_ms)]
        return []

    def flush(self, now_ms: int) -> list[ViewFrame]:
        return [self._frame((), now_ms)] if self.seen > self.sent else []

    def _frame(self, items: tuple[ViewItem, ...], now_ms: int) -> ViewFrame:
        frame = ViewFrame(after=self.sent, through=self.seen, digest=self._seen_digest, items=items)
        self.sent, self._last_frame_ms = self.seen, now_ms
        return frame


def view_items(view: CompiledView, run: Sequence[Entry], data_of: Callable[[Entry], object] = _parsed,
               ) -> tuple[ViewItem, ...]:
    """The items of ``run`` an append stream's ``view`` delivers (no removals there, nothing remembered per
    key): what ``ViewFeed.offer`` would put in its frame, computed once for all the feeds of the view."""
    if view.removals:
        raise ValueError("an update-mode view's items depend on each feed's memory of its keys: use offer")
    return tuple(ViewItem(entry, removed=False) for entry in run if view.matches(entry.key, data_of(entry)))


def encode_removal(entry: Entry) -> EncodedEntry:
    text = removal_json(entry.seq, entry.key)
    return EncodedEntry(seq=entry.seq, json=text, nbytes=len(text.encode()), digest=entry.digest)


def encode_view_frame(
    epoch: str, frame: ViewFrame, encoded: Callable[[ViewItem], EncodedEntry] | None = None,
    max_frame_bytes: int = MAX_SERVER_FRAME_BYTES,
) -> list[str]:
    """``frame`` as ``entries`` frames; ``encoded`` is the pod's cache of encoded items (by default each
    item is encoded here, which a pod with many clients should not do)."""
    encode = encoded or (lambda item: encode_removal(item.entry) if item.removed else encode_entry(item.entry))
    fragments = [encode(item) for item in frame.items]
    return pack_view_entries(epoch, frame.after, frame.through, frame.digest, fragments, max_frame_bytes)


def filter_items(
    items: Mapping[str, StateItem], view: CompiledView, data_of: Callable[[StateItem], object] | None = None
) -> dict[str, StateItem]:
    """A snapshot's (or ``/history``'s) items as the view sees them: the keys whose latest item matches."""
    read = data_of or (lambda item: item.data)
    return {key: item for key, item in items.items() if view.matches(key, read(item))}
