"""Where a connection starts: ``decide_start`` picks resume-after-seq or snapshot from the client's cursor, its
session's last ack and the stream's meta — a pure function, no I/O (docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sparkwire.protocol.positions import Cursor
from sparkwire.protocol.scope import View, position_fits
from sparkwire.replaylog.model import StreamMeta

# "rewind": the log holds another entry under the position's seq than the one its digest names
# (``continuity.verify_resume``); "view_changed": the position was covered under another view (``fit_view``).
ResetReason = Literal["none", "no_position", "epoch_mismatch", "cursor_too_old", "cursor_ahead", "rewind",
                      "view_changed"]
RESET_REASONS: tuple[ResetReason, ...] = ("none", "no_position", "epoch_mismatch", "cursor_too_old", "cursor_ahead",
                                          "rewind", "view_changed")


@dataclass(frozen=True)
class StartPlan:
    """Resume after ``after_seq`` (``reset == "none"``), or send a snapshot and continue after its seq."""

    mode: Literal["resume", "snapshot"]
    after_seq: int | None
    reset: ResetReason
    position_from: Literal["cursor", "session", "none"]

    @property
    def recovered(self) -> bool:
        return self.mode == "resume"


def _snapshot(reason: ResetReason, position_from: Literal["cursor", "session", "none"]) -> StartPlan:
    return StartPlan(mode="snapshot", after_seq=None, reset=reason, position_from=position_from)


# A client with no position (no cursor, no session): a snapshot, whatever the stream's meta.
NO_POSITION = _snapshot("no_position", "none")


def decide_start(
    cursor: Cursor | None, session_seq: int | None, meta: StreamMeta, *, session_epoch: str | None = None
) -> StartPlan:
    """How to start a connection to the stream described by ``meta`` (read from the primary, after
    subscribing to live).

    The client's cursor wins over its session's last ack: the client knows what it applied, the ack lags.
    ``session_epoch`` is the epoch the ack was stored under; ``None`` trusts the ack to be of this epoch.
    """
    src: Literal["cursor", "session"]
    if cursor is not None:
        position, src = cursor, "cursor"
    elif session_seq is not None:
        position, src = Cursor(meta.epoch if session_epoch is None else session_epoch, session_seq), "session"
    else:
        return NO_POSITION
    # Seq 0 means "applied nothing": it holds in any epoch, even one created after the client connected
    # to an empty stream (epoch "").
    if position.seq > 0 and position.epoch != meta.epoch:
        return _snapshot("epoch_mismatch", src)
    if position.seq > meta.last_seq:
        return _snapshot("cursor_ahead", src)
    if position.seq < meta.first_seq - 1:
        return _snapshot("cursor_too_old", src)
    return StartPlan(mode="resume", after_seq=position.seq, reset="none", position_from=src)


def fit_view(plan: StartPlan, position_view: str | None, view: View | None) -> StartPlan:
    """A resume whose position was covered under another view than the subscription's (``position_fits``:
    another filter or scope, a position without a view on a filtered subscription or with one on an
    unfiltered one) starts from a snapshot instead, reset ``view_changed``. ``position_view``: the view the
    plan's position came with (the cursor's ``view``, or the one stored with the session's ack)."""
    if plan.mode != "resume" or plan.after_seq is None or position_fits(plan.after_seq, position_view, view):
        return plan
    return _snapshot("view_changed", plan.position_from)
