"""The client's side of one stream, without I/O: server frames in, frames to send and decisions out.

Owns what survives reconnects (session id, cursor, state, dedup memory, counts) and what one connection
needs (welcome parameters, a snapshot being assembled, ack coalescing). ``connection.py`` feeds it
frames; unit tests feed it frames built by the server's encoders (``sparkwire.protocol``).

Its memory does not grow with the number of entries applied: the cursor and digest are one position, the
dedup memory holds the last ``dedup_capacity`` processingIds, ``recent`` the last ``recent_capacity``
(seq, processingId) pairs, and ``state`` one item per result key. Only ``keep_applied=True`` (tests and
oracles that compare a whole run with its log) keeps every applied entry, in ``applied``.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping

from sparkwire.client.dedup import ClientDeduper
from sparkwire.client.gaps import SeqGapDetector
from sparkwire.client.reaction import Reaction
from sparkwire.client.view import ViewState, client_filter
from sparkwire.protocol.client_frames import Ack, Hello, Ping, Pong, encode_ack, encode_heartbeat, encode_hello
from sparkwire.protocol.items import StateItem
from sparkwire.protocol.limits import PROTOCOL_VERSION
from sparkwire.protocol.positions import Cursor, Gap
from sparkwire.protocol.server_frames import (
    AckPolicy,
    EntriesFrame,
    ErrorFrame,
    ReceivedEntry,
    ServerFrameError,
    SnapshotPart,
    UnknownFrame,
    Welcome,
    parse_server_frame,
)
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame

# A snapshot the server sends without announcing it in a welcome (a restart mid-connection).
UNANNOUNCED_RESET = "unannounced"


class ClientSession:
    """Applies a stream's frames exactly once: dedup by processingId, no seq skipped, acks coalesced.

    ``on_entry`` gets every applied entry. ``recent`` keeps the (seq, processingId) of the last
    ``recent_capacity`` applied entries (0: none); ``applied_count`` counts them all. ``keep_applied=True``
    also keeps every one of them in ``applied``, which then grows with the stream: for tests and oracles.
    ``filter`` (docs/protocol.md's form) asks for some entries only: ``view.py`` applies its frames, and
    ``on_removal`` gets each key a removal took out of ``state`` (update mode: it stopped matching)."""

    def __init__(
        self,
        *,
        token: str | None = None,
        session_id: str | None = None,
        on_entry: Callable[[ReceivedEntry], None] | None = None,
        dedup_capacity: int = 100_000,
        recent_capacity: int = 1_000,
        keep_applied: bool = False,
        clock: Callable[[], float] = time.monotonic,
        filter: Mapping[str, object] | None = None,
        on_removal: Callable[[Removal], None] | None = None,
    ) -> None:
        if recent_capacity < 0:
            raise ValueError(f"recent_capacity must be at least 0, got {recent_capacity}")
        self.view = ViewState(client_filter(filter, token), on_removal)  # a bad filter raises FilterError here
        self.token = token
        # Generated here rather than at the first connect so the first hello already names it.
        self.session_id = session_id if session_id is not None else uuid.uuid4().hex
        self.on_entry = on_entry
        self._clock = clock
        self._deduper = ClientDeduper(dedup_capacity)
        self._detector = SeqGapDetector()
        self._epoch: str | None = None  # set with the first applied snapshot or entry: then there is a cursor
        # The digest of the entry at the cursor's seq (the server sends it with every entry and snapshot):
        # sent with the cursor and acks, so a gateway resumes only a log that still holds that entry there.
        self._digest: str | None = None
        self.state: dict[str, StateItem] = {}
        self.recent: deque[tuple[int, str]] = deque(maxlen=recent_capacity)  # the last applied, oldest first
        self.applied_count = 0
        self.keep_applied = keep_applied
        self._applied: list[tuple[int, str]] | None = [] if keep_applied else None
        self.resets: Counter[str] = Counter()
        self.frames_received = 0
        self.welcomes = 0
        self.acks_sent = 0
        self.unknown_frames = 0
        self.last_error: ErrorFrame | None = None
        self.welcome: Welcome | None = None
        self._begin_connection_state()

    # -- what tests and callers read -----------------------------------------------------------------

    @property
    def cursor(self) -> Cursor | None:
        """The last entry applied (or the snapshot's position), sent in the next hello."""
        return None if self._epoch is None else Cursor(self._epoch, self._detector.last_seq, self._digest,
                                                       self.view.view_id)

    @property
    def applied(self) -> list[tuple[int, str]]:
        """(seq, processingId) of every entry applied, in order: kept only with ``keep_applied=True``."""
        if self._applied is None:
            raise RuntimeError(
                "the client keeps every applied entry only when made with keep_applied=True; read recent "
                "(the last recent_capacity entries) or applied_count, or take the entries as they come "
                "(on_entry, or async for entry in client)")
        return self._applied

    @property
    def last_seq(self) -> int:
        return self._detector.last_seq

    @property
    def duplicates(self) -> int:
        """Entries dropped as repeats, by seq or by processingId, since the session began."""
        return self._detector.duplicates + self._deduper.duplicates + self.view.coverage.duplicates

    @property
    def gaps(self) -> int:
        return self._detector.gaps + self.view.coverage.gaps

    # -- one connection ------------------------------------------------------------------------------

    def _begin_connection_state(self) -> None:
        self.welcome = None
        self.ack_policy: AckPolicy | None = None  # the welcome's, then the last ``acks`` frame's
        self._snapshot_parts: list[SnapshotPart] = []
        self._snapshot_expected = False
        # Acks are per connection: the server refuses one that goes back on the same connection.
        self._acked_seq: int | None = None
        self._unacked_entries = 0
        self._unacked_since: float | None = None
        self._sent_cursor = False
        self._start_at_first_entry = False

    def begin_connection(self) -> str:
        """Forget the previous connection's progress and return the hello to open the new one with."""
        self._begin_connection_state()
        cursor = self.cursor
        self._sent_cursor = cursor is not None
        return encode_hello(Hello(PROTOCOL_VERSION, self.session_id, cursor, self.token, self.view.filter))

    def handle(self, text: str | bytes) -> Reaction:
        """Apply one server frame."""
        self.frames_received += 1
        try:
            frame = parse_server_frame(text)
        except ServerFrameError as error:
            return Reaction(protocol_error=str(error))
        if self.welcome is None and not isinstance(frame, (Welcome, ErrorFrame, Ping, Pong, UnknownFrame)):
            return Reaction(protocol_error=f"{type(frame).__name__} before welcome")
        if isinstance(frame, Welcome):
            return self._on_welcome(frame)
        if isinstance(frame, SnapshotPart):
            return self._on_snapshot(frame)
        if isinstance(frame, EntriesFrame):
            if self.welcome is not None and self.welcome.view is not None:
                return Reaction(protocol_error="an unfiltered entries frame on a connection with a view")
            return self._on_entries(frame)
        if isinstance(frame, ViewEntriesFrame):
            return self._on_view_entries(frame)
        if isinstance(frame, ErrorFrame):
            self.last_error = frame
        elif isinstance(frame, AckPolicy):  # the pod's ack budget moved: ack as it now asks
            self.ack_policy = frame
        elif isinstance(frame, Ping):
            return Reaction(send=[encode_heartbeat(Pong(frame.t))])
        elif isinstance(frame, UnknownFrame):
            self.unknown_frames += 1  # a newer server's addition: not a reason to drop the connection
        return Reaction()

    def _on_welcome(self, welcome: Welcome) -> Reaction:
        if self.welcome is not None:
            return Reaction(protocol_error="second welcome on one connection")
        self.welcome = welcome
        self.ack_policy = AckPolicy(welcome.ack_every, welcome.ack_interval_ms)
        self.welcomes += 1
        self.session_id = welcome.session  # the server may refuse ours and hand out a new one
        if (refused := self.view.on_welcome(welcome)) is not None:
            return Reaction(protocol_error=refused)
        if not welcome.recovered:
            self.resets[welcome.reset or "unspecified"] += 1
            self._snapshot_expected = True
        elif not self._sent_cursor:
            # Resumed from the session's last ack, a seq this client never learnt: the first entry sets it.
            self._start_at_first_entry = True
        else:
            # Resumed after its cursor: ack it once on this connection, even with nothing new. The last
            # connection's final ack may have been lost with it (a killed pod), and the session's bookmark
            # would lag until new entries came. (The browser client does the same.)
            self._mark_progress(0)
        return Reaction()

    def _on_snapshot(self, part: SnapshotPart) -> Reaction:
        parts = self._snapshot_parts
        if parts and (part.epoch, part.seq) != (parts[0].epoch, parts[0].seq):
            return Reaction(protocol_error=f"snapshot part of {part.epoch!r}/{part.seq} inside one of "
                                           f"{parts[0].epoch!r}/{parts[0].seq}")
        if not parts and not self._snapshot_expected:
            self.resets[UNANNOUNCED_RESET] += 1
        parts.append(part)
        if part.more:
            return Reaction()  # state is replaced only once whole: a half snapshot is no state at all
        self._snapshot_parts, self._snapshot_expected = [], False
        self.state = {key: item for p in parts for key, item in p.items.items()}
        self._detector.reset(part.seq)
        self._epoch = part.epoch
        self._digest = part.digest
        self.view.view_id = self.welcome.view if self.welcome is not None else None  # filtered as its connection
        self._mark_progress(entries=0)
        return Reaction()

    def _on_entries(self, frame: EntriesFrame) -> Reaction:
        if self._snapshot_parts or self._snapshot_expected:
            return Reaction(protocol_error="entries before the snapshot was complete")
        moved = 0
        applied: list[ReceivedEntry] = []
        if self._start_at_first_entry and frame.entries:
            self._start_at_first_entry = False
            self._detector.reset(frame.entries[0].seq - 1)
            self._digest = None  # the entry before the first one is not known here
        for entry in frame.entries:
            verdict = self._detector.observe(entry.seq)
            if verdict == "gap":
                # Entries after a hole are dropped; the cursor stays before it, and a resume refills it.
                gap = Gap(expected=self._detector.last_seq + 1, got=entry.seq)
                if moved:
                    self._mark_progress(moved)
                return Reaction(send=self._ack_if_moved(), gap=gap, applied=tuple(applied))
            if verdict == "duplicate":
                continue
            moved += 1
            self._epoch = frame.epoch
            self._digest = entry.digest
            # The seq is taken either way (the next seq follows it); only a new result is applied (rendered).
            if not self._deduper.is_duplicate(entry.processing_id):
                self._apply(entry)
                applied.append(entry)
            else:
                # Still the newest item of its key in the log: after a lost log, the batch the killed
                # driver had committed comes again in the new epoch, after that epoch's snapshot, which
                # holds the older revision. The state follows the log; nothing is rendered twice.
                self.state[entry.key] = StateItem(seq=entry.seq, processing_id=entry.processing_id, data=entry.data)
        if moved:
            self._mark_progress(moved)
        return Reaction(send=self.due_acks(), applied=tuple(applied))

    def _on_view_entries(self, frame: ViewEntriesFrame) -> Reaction:
        """A filtered frame (view.py): its position is its ``through``, its gaps are by coverage."""
        if self.welcome is None or self.welcome.view is None:
            return Reaction(protocol_error="a filtered entries frame on a connection whose welcome names no view")
        if self._snapshot_parts or self._snapshot_expected:
            return Reaction(protocol_error="entries before the snapshot was complete")
        covered = self.view.cover(frame, self._detector.last_seq, self._digest, self._start_at_first_entry)
        self._start_at_first_entry = False
        if covered.verdict == "gap":
            gap = Gap(expected=self.view.coverage.covered + 1, got=frame.after + 1)
            return Reaction(send=self._ack_if_moved(), gap=gap)
        if covered.verdict == "duplicate":
            return Reaction()
        self._detector.reset(self.view.coverage.covered)
        self._digest, self._epoch, self.view.view_id = self.view.coverage.digest, frame.epoch, self.welcome.view
        applied = self.view.apply(covered.fresh, self.state, self._deduper.is_duplicate, self._apply)
        self._mark_progress(len(covered.fresh))
        return Reaction(send=self.due_acks(), applied=tuple(applied))

    def _apply(self, entry: ReceivedEntry) -> None:
        self.state[entry.key] = StateItem(seq=entry.seq, processing_id=entry.processing_id, data=entry.data)
        self.applied_count += 1
        self.recent.append((entry.seq, entry.processing_id))
        if self._applied is not None:
            self._applied.append((entry.seq, entry.processing_id))
        if self.on_entry is not None:
            self.on_entry(entry)

    # -- acks ----------------------------------------------------------------------------------------

    def _mark_progress(self, entries: int) -> None:
        """The seq moved (``entries`` entries, or a snapshot with 0): start the ack clock if it is not running."""
        if self._detector.last_seq == self._acked_seq:
            return
        self._unacked_entries += entries
        if self._unacked_since is None:
            self._unacked_since = self._clock()

    def _ack_if_moved(self) -> list[str]:
        seq = self._detector.last_seq
        if self.welcome is None or seq == self._acked_seq or self._unacked_since is None:
            return []
        self._acked_seq, self._unacked_entries, self._unacked_since = seq, 0, None
        self.acks_sent += 1
        return [encode_ack(Ack(seq, self.duplicates, self.gaps, self._digest))]

    def seconds_until_ack(self) -> float | None:
        """How long until an ack is due by time (0 if it is due now), or None if nothing awaits an ack."""
        if self.ack_policy is None or self._unacked_since is None:
            return None
        due_at = self._unacked_since + self.ack_policy.ack_interval_ms / 1000
        return max(0.0, due_at - self._clock())

    def due_acks(self) -> list[str]:
        """The ack to send now, if ``ackEvery`` entries or ``ackIntervalMs`` passed since the seq moved."""
        if self.ack_policy is None:
            return []
        by_count = self._unacked_entries >= self.ack_policy.ack_every
        if by_count or self.seconds_until_ack() == 0.0:
            return self._ack_if_moved()
        return []

    def final_acks(self) -> list[str]:
        """The ack to send before closing on purpose, whether or not one is due, so the session records
        how far the client got."""
        return self._ack_if_moved()
