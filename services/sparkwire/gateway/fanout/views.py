"""The filtered subscriptions of one stream on a pod (issue 43; docs/protocol.md, "Filtered subscriptions"):
their views compiled once per distinct view and shared by its connections, each entry's data parsed once for
all of them, and the match of an entry remembered per view, so clients of one view share its evaluation.

Only filtered connections come here: an unfiltered one takes the hub's path as before, with no added cost.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import replace

from sparkwire.protocol.filter_match import Matcher, compile_filter, match_everything
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import encode_snapshot
from sparkwire.protocol.view_feed import CompiledView, filter_items, view_equality
from sparkwire.replaylog.model import Entry, Snapshot

# Entries whose parsed data is kept (the ring's order of magnitude): a connection replaying from further back
# parses again, which is correct, only slower.
PARSED_ENTRIES = 8192
# Match results kept per view and matcher; cleared whole when full (a memo, never a source of truth).
MATCHES_PER_VIEW = 8192


def shared_matcher(matcher: Matcher, size: int = MATCHES_PER_VIEW) -> Matcher:
    """``matcher`` remembering its answer per (data object, key): the feeds of one view ask it about the same
    parsed entry (``StreamViews.data_of`` hands them one object), and only the first evaluates. The object
    is kept with its answer, so an id is never mistaken for another object's after it was freed."""
    memo: dict[tuple[int, str], tuple[object, bool]] = {}

    def match(key: str, data: object) -> bool:
        hit = memo.get((id(data), key))
        if hit is not None and hit[0] is data:
            return hit[1]
        result = matcher(key, data)
        if len(memo) >= size:
            memo.clear()
        memo[(id(data), key)] = (data, result)
        return result

    return match


def _compiled(view: View, removals: bool) -> CompiledView:
    return CompiledView(
        in_scope=match_everything if view.scope is None else shared_matcher(compile_filter(view.scope)),
        own=match_everything if view.own is None else shared_matcher(compile_filter(view.own)),
        removals=removals,
        equality=view_equality(view),
    )


class StreamViews:
    """One stream's views on a pod. ``removals``: whether the stream is in update mode (its descriptor's
    ``mode``), where a key that stops matching is removed; None until known."""

    def __init__(self, parsed_entries: int = PARSED_ENTRIES) -> None:
        self.removals: bool | None = None
        # Held by the connections (their feeds) and requests that use them, and gone with the last: the views
        # here are the ones in use, which each batch is evaluated for (``append_views``).
        self._compiled: weakref.WeakValueDictionary[tuple[str, bool], CompiledView] = weakref.WeakValueDictionary()
        self._parsed: dict[tuple[int, str], object] = {}
        self._parsed_entries = parsed_entries
        self._mode_asked_s = float("-inf")

    def mode_wanted(self, now_s: float, every_s: float = 1.0) -> bool:
        """Whether the hub should read the descriptor for the mode now: not known yet, a filtered connection
        is here to need it, and not asked within ``every_s`` (a stream whose writer stores no descriptor is
        not read for it at every batch)."""
        if self.removals is not None or not self._compiled or now_s - self._mode_asked_s < every_s:
            return False
        self._mode_asked_s = now_s
        return True

    def compiled(self, view: View) -> CompiledView:
        """The view's matchers, compiled once and shared by every connection of the view."""
        removals = bool(self.removals)
        found = self._compiled.get((view.id, removals))
        if found is None:
            found = self._compiled[(view.id, removals)] = _compiled(view, removals)
        return found

    def append_views(self) -> list[CompiledView]:
        """The append-mode views in use on the pod: what a live batch is evaluated for in one pass
        (``LiveBatch.view_items``)."""
        return [view for view in self._compiled.values() if not view.removals]

    def data_of(self, entry: Entry) -> object:
        """The entry's data, parsed once per pod (the ``ViewFeed``'s ``data_of``)."""
        key = (entry.seq, entry.digest)
        found = self._parsed.get(key, self)
        if found is self:
            if len(self._parsed) >= self._parsed_entries:
                self._parsed.clear()
            found = self._parsed[key] = json.loads(entry.data)
        return found

    def snapshot_frames(self, snapshot: Snapshot, view: View, max_frame_bytes: int) -> list[str]:
        """``snapshot`` as the view sees it (``filter_items``: the keys whose latest item is in the view)."""
        filtered = replace(snapshot, items=filter_items(snapshot.items, self.compiled(view)))
        return encode_snapshot(filtered, max_frame_bytes)

    def learn_mode(self, descriptor: str | None) -> None:
        """The stream's mode from its descriptor (JSON text, None when its writer stored none): removals in
        update mode only. A view compiled before it was known is compiled again by its senders' next batch
        (``ViewSender``), which then removes keys as an update stream's feed must."""
        if descriptor is None:
            return
        try:
            mode = json.loads(descriptor).get("mode")
        except (ValueError, AttributeError):
            return
        self.removals = mode == "update"
