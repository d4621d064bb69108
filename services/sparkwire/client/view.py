"""The client's side of a filtered subscription (docs/protocol.md, "Filtered subscriptions"): the filter in
the hello, the view in the cursor, and the filtered ``entries`` frames, applied by coverage.

``ClientSession`` holds one ``ViewState`` and hands it the filtered frames; the unfiltered frames never
come here. A subscription is filtered when the welcome names a view: the client asked for a ``filter``, or
its token has a scope for the stream (then without a filter of its own). The position stays where the
session keeps it for unfiltered frames (its seq detector's ``last_seq``, its digest and epoch): a filtered
frame's ``through`` moves it, and ``ViewCoverage`` decides each frame against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from sparkwire.client.coverage import ViewCoverage
from sparkwire.client.reaction import Reaction
from sparkwire.protocol.client_frames import Hello, encode_hello
from sparkwire.protocol.filter_form import Filter, FilterError, parse_filter
from sparkwire.protocol.items import StateItem
from sparkwire.protocol.limits import MAX_CLIENT_FRAME_BYTES, MAX_SEQ, PROTOCOL_VERSION
from sparkwire.protocol.positions import Cursor, Gap
from sparkwire.protocol.server_frames import ReceivedEntry, Welcome
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame

if TYPE_CHECKING:  # session.py imports this module
    from sparkwire.client.session import ClientSession

# The longest cursor a resume adds to the hello: an epoch of 64 characters, the largest seq, a digest, a view.
_LONGEST_CURSOR = Cursor("e" * 64, MAX_SEQ, "0" * 16, "0" * 16)


def client_filter(value: Mapping[str, object] | None, token: str | None) -> Filter | None:
    """``value`` (the documented filter form) parsed as the server will parse it, so a bad filter raises
    ``FilterError`` (a ``ValueError`` naming the part) here, before any connection, rather than close the
    first one with ``4422``; and refused (``FilterError`` too) if its hello could exceed the client frame
    limit, which the server would close with ``1009``."""
    if value is None:
        return None
    parsed = parse_filter(dict(value) if isinstance(value, Mapping) else value, "filter")
    longest = len(encode_hello(Hello(PROTOCOL_VERSION, "s" * 128, _LONGEST_CURSOR, token, parsed)).encode())
    if longest > MAX_CLIENT_FRAME_BYTES:
        raise FilterError(f"filter: a hello with this filter (and token) takes up to {longest} bytes, over the "
                          f"{MAX_CLIENT_FRAME_BYTES}-byte limit of a client frame")
    return parsed


class ViewState:
    """What a session keeps for filtered subscriptions: its own ``filter`` (None: none asked for), the
    ``view_id`` its position was covered under (the welcome's; sent in the cursor), the coverage counts, and
    ``removals``, how many keys a removal took out of the state. ``on_removal`` gets each such removal."""

    def __init__(self, filter: Filter | None, on_removal: Callable[[Removal], None] | None = None) -> None:
        self.filter = filter
        self.on_removal = on_removal
        self.view_id: str | None = None
        self.coverage = ViewCoverage()
        self.removals = 0

    def on_welcome(self, welcome: Welcome) -> str | None:
        """Note the welcome; a protocol error if it serves no view to a client that asked for a filter
        (a server that ignores the filter would send every row)."""
        if self.filter is not None and welcome.view is None:
            return "the hello asked for a filter but the welcome names no view"
        if welcome.recovered:
            # The server resumed this position in the welcome's view (``position_fits``): it is that view's.
            self.view_id = welcome.view
        return None

    def on_entries(self, session: ClientSession, frame: ViewEntriesFrame) -> Reaction:
        """Apply a filtered ``entries`` frame: ``next`` applies its fresh items and moves the position to
        ``through``; a repeat is dropped; one that starts after the position is a gap (resume from it)."""
        welcome = session.welcome
        if welcome is None or welcome.view is None:
            return Reaction(protocol_error="a filtered entries frame on a connection whose welcome names no view")
        if session._snapshot_parts or session._snapshot_expected:
            return Reaction(protocol_error="entries before the snapshot was complete")
        coverage = self.coverage
        if session._start_at_first_entry:
            # Resumed from the session's last ack, which this client never learnt: the frame says where.
            session._start_at_first_entry = False
            coverage.reset(frame.after, None)
        else:
            coverage.reset(session._detector.last_seq, session._digest)
        covered = coverage.observe(frame)
        if covered.verdict == "gap":
            gap = Gap(expected=coverage.covered + 1, got=frame.after + 1)
            return Reaction(send=session._ack_if_moved(), gap=gap)
        if covered.verdict == "duplicate":
            return Reaction()
        session._detector.reset(coverage.covered)
        session._digest, session._epoch, self.view_id = coverage.digest, frame.epoch, welcome.view
        applied = self._apply(session, covered.fresh)
        session._mark_progress(len(covered.fresh))
        return Reaction(send=session.due_acks(), applied=tuple(applied))

    def _apply(self, session: ClientSession, items: tuple[ReceivedEntry | Removal, ...]) -> list[ReceivedEntry]:
        applied: list[ReceivedEntry] = []
        state = session.state
        for item in items:
            if isinstance(item, Removal):
                # Idempotent: a removal of a key not held (filtered out, or removed already) changes nothing.
                if state.pop(item.key, None) is not None:
                    self.removals += 1
                    if self.on_removal is not None:
                        self.on_removal(item)
            elif not session._deduper.is_duplicate(item.processing_id):
                session._apply(item)
                applied.append(item)
            else:  # a result seen before, in another epoch: the state follows the log, nothing is rendered twice
                state[item.key] = StateItem(seq=item.seq, processing_id=item.processing_id, data=item.data)
        return applied
