"""Continuity: whether the log still holds the entry a position ends at, or went back under a reader — pure
functions, no I/O (docs/protocol.md, "Continuity"; docs/replay-log.md, "Across a failover").

A position (a client's cursor, a session's last ack, the hub's head) is (epoch, seq) and, when known, the
digest of the entry at seq (``protocol/digest.py``). Seqs alone cannot tell a log that went back and was
written again under the same seqs (a lagging replica promoted, the writer dead before its checkpoint, a re-run
with other values) from the log the position was taken in; the digest can.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from sparkwire.gateway.recovery.start_plan import StartPlan
from sparkwire.replaylog.model import Entry


def verify_resume(plan: StartPlan, digest: str | None, held: Entry | None) -> StartPlan:
    """``plan`` (``decide_start``'s) checked against ``held``, the log's entry at the seq it resumes after (None
    when the log does not hold it), for a position whose entry had ``digest``.

    A resume stands when the log holds that very entry there; another entry under that seq is a ``rewind``
    (a snapshot, as for an epoch change); a position whose entry the log no longer holds cannot be proven:
    ``cursor_too_old`` (a snapshot). A position without a digest, a snapshot plan and a resume after seq 0
    ("applied nothing") are left as they are: they prove only what seqs prove."""
    if plan.mode != "resume" or not plan.after_seq or not digest:
        return plan
    if held is None or held.seq != plan.after_seq:
        return replace(plan, mode="snapshot", after_seq=None, reset="cursor_too_old")
    if held.digest != digest:
        return replace(plan, mode="snapshot", after_seq=None, reset="rewind")
    return plan


HeadVerdict = Literal["intact", "behind", "rewound"]


def head_verdict(head_seq: int, head_digest: str, last_seq: int, held: Entry | None, *, behind_for_s: float,
                 wait_s: float) -> HeadVerdict:
    """What became of the last entry a reader read (``head_seq``, digest ``head_digest``, ``""`` if unknown) in a
    log of the same epoch that now ends at ``last_seq`` and holds ``held`` at ``head_seq`` (None if nothing).

    ``"rewound"``: the log holds another entry there — it went back and was written again (a lagging replica
    promoted, the writer's re-run with other values) — or it has ended before that seq for ``wait_s`` already.
    ``"behind"``: it ends before that seq, for less than ``wait_s`` (``behind_for_s`` so far): a promoted replica
    that holds the batch staged but not its publish gets the very same entries again from the writer within
    seconds (replay-log.md, mechanism 2); wait, then look again. ``"intact"``: anything else (the same entry, or
    one that cannot be compared: an unknown digest, a trimmed entry)."""
    if head_seq <= 0:
        return "intact"
    if last_seq < head_seq:
        return "behind" if behind_for_s < wait_s else "rewound"
    if head_digest and held is not None and held.seq == head_seq and held.digest != head_digest:
        return "rewound"
    return "intact"
