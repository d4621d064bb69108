"""Continuity: whether the log still holds the entry a position ends at, or went back under a reader — pure
functions, no I/O (docs/protocol.md, "Continuity"; docs/replay-log.md, "Across a failover").

A position (a client's cursor, a session's last ack, the hub's head) is (epoch, seq) and, when known, the
digest of the entry at seq (``protocol/digest.py``). Seqs alone cannot tell a log that went back and was
written again under the same seqs (a lagging replica promoted, the writer dead before its checkpoint, a re-run
with other values) from the log the position was taken in; the digest can.
"""

from __future__ import annotations

from dataclasses import replace

from sparkwire.gateway.recovery import StartPlan
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


def rewound(head_seq: int, head_digest: str, last_seq: int, held: Entry | None) -> bool:
    """Whether the log went back under a reader whose last entry read was ``head_seq`` (digest ``head_digest``,
    ``""`` if unknown), in the same epoch: its ``last_seq`` is now below that seq, or it holds another entry
    there (``held``: the log's entry at ``head_seq``, None if it holds none, e.g. trimmed)."""
    if head_seq <= 0:
        return False
    if last_seq < head_seq:
        return True
    return bool(head_digest) and held is not None and held.seq == head_seq and held.digest != head_digest
