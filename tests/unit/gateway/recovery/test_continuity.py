"""Continuity (issue 47): a resume only where the log still holds the entry the position's digest names, and a
hub that sees the log go back in its epoch declares a new one. The pure decisions, then the hub and the
handshake over the in-memory log."""

from __future__ import annotations

import asyncio
import json

import pytest

from sparkwire.gateway.connection.handshake import Admission, start
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.recovery.continuity import head_verdict, verify_resume
from sparkwire.gateway.recovery.start_plan import StartPlan
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.protocol import Cursor, Hello, SnapshotPart, Welcome
from sparkwire.replaylog.memory import MemorySessionRecords, MemoryStreamLog
from sparkwire.replaylog.model import Entry, Record
from sparkwire.replaylog.port import SessionPosition

from ..connection_fakes import FakeSocket, FakeWire, budget, hub_with, settings


def entry(seq: int, value: float) -> Entry:
    return Entry(seq, f"window-{seq}", "k", json.dumps({"sum": value}), 1_700_000_000_000, 3)


RESUME = StartPlan(mode="resume", after_seq=30, reset="none", position_from="cursor")


# --- the pure decisions -------------------------------------------------------------------------------


def test_a_resume_stands_when_the_log_holds_the_entry_the_digest_names() -> None:
    assert verify_resume(RESUME, entry(30, 1.0).digest, entry(30, 1.0)) == RESUME


def test_another_entry_under_the_same_seq_is_a_rewind_reset() -> None:
    # The double failure: batch N published again with other values (a float sum in another order).
    plan = verify_resume(RESUME, entry(30, 0.30000000000000004).digest, entry(30, 0.3))
    assert (plan.mode, plan.after_seq, plan.reset, plan.position_from) == ("snapshot", None, "rewind", "cursor")
    assert not plan.recovered


def test_an_entry_the_log_no_longer_holds_cannot_be_proven_and_gets_a_snapshot() -> None:
    plan = verify_resume(RESUME, entry(30, 1.0).digest, None)
    assert (plan.mode, plan.reset) == ("snapshot", "cursor_too_old")
    assert verify_resume(RESUME, entry(30, 1.0).digest, entry(31, 1.0)).reset == "cursor_too_old"


@pytest.mark.parametrize("plan", [
    RESUME,  # without a digest: what seqs prove, as before digests
    StartPlan(mode="resume", after_seq=0, reset="none", position_from="cursor"),  # "applied nothing"
    StartPlan(mode="snapshot", after_seq=None, reset="epoch_mismatch", position_from="cursor"),
])
def test_positions_without_a_digest_and_plans_that_resume_nothing_are_left_alone(plan: StartPlan) -> None:
    assert verify_resume(plan, None, entry(30, 2.0)) == plan
    if plan is not RESUME:
        assert verify_resume(plan, entry(30, 1.0).digest, entry(30, 2.0)) == plan


def test_a_log_went_back_when_it_holds_another_entry_at_the_head_or_ends_before_it_for_too_long() -> None:
    head = entry(30, 1.0)

    def verdict(digest: str, last_seq: int, held: Entry | None, behind_for_s: float = 0.0) -> str:
        return head_verdict(30, digest, last_seq, held, behind_for_s=behind_for_s, wait_s=8.0)

    assert verdict(head.digest, 33, entry(30, 2.0)) == "rewound"  # written again past it, other values
    assert verdict(head.digest, 30, entry(30, 2.0)) == "rewound"  # written again up to it
    # The promoted replica lacks 28..30: the writer may publish them again identically (staged bytes), so wait.
    assert verdict(head.digest, 27, None, behind_for_s=2.0) == "behind"
    assert verdict(head.digest, 27, None, behind_for_s=8.0) == "rewound"  # it did not: what was read is gone
    assert verdict("", 27, None, behind_for_s=9.0) == "rewound"  # even without knowing the head's digest
    assert verdict(head.digest, 33, head) == "intact"  # the same entry: it moved on
    assert verdict("", 33, entry(30, 2.0)) == "intact"  # unknown digest: seqs cannot tell
    assert verdict(head.digest, 33, None) == "intact"  # trimmed: cannot compare
    assert head_verdict(0, "", 0, None, behind_for_s=0.0, wait_s=8.0) == "intact"  # nothing read yet


# --- the hub --------------------------------------------------------------------------------------


async def follow_until(hub: StreamHub, done: object, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not (callable(done) and done()):
            await asyncio.sleep(0.01)


def records(first: int, last: int, value: float) -> list[Record]:
    return [Record(f"window-{n}", f"k{n % 3}", json.dumps({"n": n, "sum": value})) for n in range(first, last + 1)]


@pytest.mark.timeout(30)
async def hub_through_six(*, block_ms: int, behind_wait_s: float) -> tuple[MemoryStreamLog, StreamHub,
                                                                            asyncio.Task[None]]:
    """A hub following a log of seqs 1..6 (committed in two batches), read through 6."""
    log = MemoryStreamLog()
    await log.commit(records(1, 3, 1.0))
    hub = StreamHub(log, "s", ring_size=16, block_ms=block_ms, behind_wait_s=behind_wait_s)
    task = asyncio.create_task(hub.run())
    await follow_until(hub, lambda: hub.head_seq == 3)
    await log.commit(records(4, 6, 1.0))
    await follow_until(hub, lambda: hub.head_seq == 6)
    return log, hub, task


@pytest.mark.parametrize("written_again", [False, True])
def test_the_hub_declares_a_new_epoch_when_the_log_goes_back_and_closes_its_connections_as_rewound(
    written_again: bool, caplog: pytest.LogCaptureFixture,
) -> None:
    """The log goes back from 6 to 3 in its epoch (a lagging replica promoted); ``written_again``: the writer's
    re-run has already written 4..6 again with other values, so seqs alone show nothing; otherwise the log stays
    behind for longer than the hub waits."""
    async def scenario() -> tuple[str, str, str, int, object]:
        log, hub, task = await hub_through_six(block_ms=30, behind_wait_s=0.3)
        try:
            subscription = hub.subscribe()
            old = log.epoch
            log.rewind(3)
            if written_again:
                await log.commit(records(4, 6, 2.0))
            await follow_until(hub, lambda: hub.epoch != old)
            return old, hub.epoch, log.epoch, hub.head_seq, subscription.ended
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    old, hub_epoch, log_epoch, head, ended = asyncio.run(scenario())
    assert hub_epoch == log_epoch != old  # declared in the log, adopted by the hub
    assert head == (6 if written_again else 3)
    assert ended == "stream_rewound"
    lines = [r for r in caplog.records if "stream rewound" in r.getMessage()]
    assert lines and not any("stream epoch changed" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(30)
def test_a_log_behind_the_hub_that_gets_the_same_entries_again_in_time_is_no_rewind() -> None:
    """Mechanism 2 of replay-log.md: the promoted replica held the batch staged, not published; the writer
    publishes the staged bytes again under the same seqs. Nothing to reset, nobody closed."""
    async def scenario() -> tuple[str, str, object, int]:
        log, hub, task = await hub_through_six(block_ms=20, behind_wait_s=5.0)
        try:
            subscription = hub.subscribe()
            epoch = log.epoch
            log.rewind(3)
            await asyncio.sleep(0.2)  # several looks at a log behind
            await log.commit(records(4, 6, 1.0), batch_id=1)  # the same bytes again
            await log.commit(records(7, 7, 1.0))
            await follow_until(hub, lambda: hub.head_seq == 7)
            return epoch, log.epoch, subscription.ended, hub.head_seq
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    before, after, ended, head = asyncio.run(scenario())
    assert before == after and ended is None and head == 7


@pytest.mark.timeout(30)
def test_a_hub_whose_log_did_not_go_back_declares_nothing() -> None:
    async def scenario() -> tuple[str, str, object]:
        log = MemoryStreamLog()
        await log.commit(records(1, 3, 1.0))
        hub = StreamHub(log, "s", ring_size=16, block_ms=20)
        task = asyncio.create_task(hub.run())
        try:
            await follow_until(hub, lambda: hub.head_seq == 3)
            subscription = hub.subscribe()
            epoch = log.epoch
            await asyncio.sleep(0.2)  # several quiet checks of the head
            await log.commit(records(4, 5, 1.0))
            await follow_until(hub, lambda: hub.head_seq == 5)
            return epoch, log.epoch, subscription.ended
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    before, after, ended = asyncio.run(scenario())
    assert before == after and ended is None


# --- the handshake ----------------------------------------------------------------------------------


async def rewritten_hub() -> tuple[StreamHub, str, str]:
    """A log of 12 entries whose 10..12 were written again with other values in the same epoch, and the
    digests of entry 12 before and after."""
    hub = await hub_with(12)
    log = hub.log
    assert isinstance(log, MemoryStreamLog)
    [before] = await log.read_after(11, 1)
    log.rewind(9)
    await log.commit([Record(f"r{n}", f"k{n % 5}", json.dumps({"n": n, "again": True})) for n in range(10, 13)])
    [after] = await log.read_after(11, 1)
    return hub, before.digest, after.digest


def test_a_cursor_whose_entry_was_rewritten_gets_a_snapshot_with_reset_rewind() -> None:
    async def run() -> tuple[list[object], int, str]:
        hub, before, after = await rewritten_hub()
        socket = FakeSocket()
        admission = Admission(Hello(1, None, Cursor(hub.epoch, 12, before), None), None, "fresh", None)
        begun = await start(socket.as_websocket(), FakeWire(), hub, store(), settings(), admission, budget())
        return socket.frames(), begun.after, after

    frames, after_seq, digest = asyncio.run(run())
    welcome, *parts = frames
    assert isinstance(welcome, Welcome) and not welcome.recovered and welcome.reset == "rewind"
    assert parts and isinstance(parts[-1], SnapshotPart) and parts[-1].seq == 12 == after_seq
    assert parts[-1].digest == digest  # the snapshot names the entry it ends at: the next cursor proves it


def test_a_cursor_with_the_entry_the_log_holds_resumes_and_one_without_a_digest_resumes_as_before() -> None:
    async def run() -> list[list[object]]:
        hub, _before, after = await rewritten_hub()
        out = []
        for cursor in (Cursor(hub.epoch, 12, after), Cursor(hub.epoch, 12)):
            socket = FakeSocket()
            await start(socket.as_websocket(), FakeWire(), hub, store(), settings(),
                        Admission(Hello(1, None, cursor, None), None, "fresh", None), budget())
            out.append(socket.frames())
        return out

    for frames in asyncio.run(run()):
        [welcome] = frames
        assert isinstance(welcome, Welcome) and welcome.recovered and welcome.reset is None


def test_a_session_whose_last_ack_names_a_rewritten_entry_gets_a_snapshot_with_reset_rewind() -> None:
    async def run() -> Welcome:
        hub, before, _after = await rewritten_hub()
        socket = FakeSocket()
        stored = SessionPosition(hub.epoch, 12, 0, 0, before)
        await start(socket.as_websocket(), FakeWire(), hub, store(), settings(),
                    Admission(Hello(1, "s1", None, None), None, "s1", stored), budget())
        welcome = socket.frames()[0]
        assert isinstance(welcome, Welcome)
        return welcome

    welcome = asyncio.run(run())
    assert not welcome.recovered and welcome.reset == "rewind"


def store() -> SessionStore:
    return SessionStore(MemorySessionRecords(), ttl_seconds=60, pod="test")


def test_an_entry_read_twice_has_one_digest_computed_once() -> None:
    item = entry(5, 1.0)
    assert item.digest is item.digest and len(item.digest) == 16
