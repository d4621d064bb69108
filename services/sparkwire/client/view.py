"""The client's side of a filtered subscription (docs/protocol.md, "Filtered subscriptions"): the filter in
the hello, the view in the cursor, and the filtered ``entries`` frames, applied by coverage.

``ClientSession`` holds one ``ViewState``: for each filtered frame the state decides (``cover``) and applies
(``apply``), the session keeps the position, the dedup and the acks; the unfiltered frames never come here.
A subscription is filtered when the welcome names a view: the client asked for a ``filter``, or its token has
a scope for the stream (then without a filter of its own). The position stays where the session keeps it for
unfiltered frames (its seq detector's ``last_seq``, its digest and epoch): a filtered frame's ``through``
moves it, and ``ViewCoverage`` decides each frame against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sparkwire.client.coverage import Covered, ViewCoverage
from sparkwire.protocol.client_frames import Hello, encode_hello
from sparkwire.protocol.filter_form import Filter, FilterError, parse_filter
from sparkwire.protocol.items import StateItem
from sparkwire.protocol.limits import MAX_CLIENT_FRAME_BYTES, MAX_SEQ, PROTOCOL_VERSION
from sparkwire.protocol.positions import Cursor
from sparkwire.protocol.server_frames import ReceivedEntry, Welcome
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame

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

    def cover(self, frame: ViewEntriesFrame, position: int, digest: str | None, from_frame: bool) -> Covered:
        """Decide ``frame`` against the session's position (``position``, its ``digest``) or, ``from_frame``,
        against the frame's own ``after``: a connection resumed from the session's last ack, a seq this
        client never learnt, starts where its first frame says."""
        if from_frame:
            self.coverage.reset(frame.after, None)
        else:
            self.coverage.reset(position, digest)
        return self.coverage.observe(frame)

    def apply(self, items: tuple[ReceivedEntry | Removal, ...], state: dict[str, StateItem],
              is_duplicate: Callable[[str], bool], apply_entry: Callable[[ReceivedEntry], None]) -> list[ReceivedEntry]:
        """Apply a frame's fresh items to ``state``; the entries applied (rendered), in seq order."""
        applied: list[ReceivedEntry] = []
        for item in items:
            if isinstance(item, Removal):
                # Idempotent: a removal of a key not held (filtered out, or removed already) changes nothing.
                if state.pop(item.key, None) is not None:
                    self.removals += 1
                    if self.on_removal is not None:
                        self.on_removal(item)
            elif not is_duplicate(item.processing_id):
                apply_entry(item)
                applied.append(item)
            else:  # a result seen before, in another epoch: the state follows the log, nothing is rendered twice
                state[item.key] = StateItem(seq=item.seq, processing_id=item.processing_id, data=item.data)
        return applied
