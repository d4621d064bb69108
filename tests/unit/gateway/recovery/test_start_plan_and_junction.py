from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sparkwire.gateway.recovery.junction import GapError, ReplayMerger, junction_step
from sparkwire.gateway.recovery.start_plan import StartPlan, decide_start
from sparkwire.protocol.positions import Cursor, Gap
from sparkwire.replaylog.model import Entry, StreamMeta


def entry(seq: int) -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key="k", data="{}", commit_ms=seq, batch_id=0)


def meta(epoch: str = "e1", first_seq: int = 11, last_seq: int = 50) -> StreamMeta:
    return StreamMeta(epoch=epoch, first_seq=first_seq, last_seq=last_seq, last_batch=0, last_chunk=0,
                      query_id="q", created_ms=0, last_commit_ms=0)


# --- decide_start ------------------------------------------------------------------------------


def resume(after: int, source: str = "cursor") -> StartPlan:
    return StartPlan(mode="resume", after_seq=after, reset="none", position_from=source)  # type: ignore[arg-type]


def snapshot(reason: str, source: str = "cursor") -> StartPlan:
    return StartPlan(mode="snapshot", after_seq=None, reset=reason, position_from=source)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cursor", "session_seq", "expected"),
    [
        (Cursor("e1", 30), None, resume(30)),
        (Cursor("e1", 10), None, resume(10)),  # first_seq - 1: the next entry is still there
        (Cursor("e1", 50), None, resume(50)),  # at the head: nothing to replay
        (Cursor("e1", 9), None, snapshot("cursor_too_old")),
        (Cursor("e1", 51), None, snapshot("cursor_ahead")),
        (Cursor("e0", 30), None, snapshot("epoch_mismatch")),
        (Cursor("e0", 51), None, snapshot("epoch_mismatch")),  # another epoch's seqs mean nothing here
        (Cursor("e1", 30), 45, resume(30)),  # the cursor wins over the session's lagging ack
        (None, 40, resume(40, "session")),
        (None, 5, snapshot("cursor_too_old", "session")),
        (None, 60, snapshot("cursor_ahead", "session")),
        (None, None, snapshot("no_position", "none")),
    ],
)
def test_start_decision_table(cursor: Cursor | None, session_seq: int | None, expected: StartPlan) -> None:
    plan = decide_start(cursor, session_seq, meta())
    assert plan == expected
    assert plan.recovered == (expected.mode == "resume")


def test_a_session_ack_from_another_epoch_is_a_mismatch() -> None:
    assert decide_start(None, 30, meta(), session_epoch="e0") == snapshot("epoch_mismatch", "session")
    assert decide_start(None, 30, meta(), session_epoch="e1") == resume(30, "session")


def test_seq_zero_means_nothing_applied_and_holds_in_any_epoch_while_nothing_was_trimmed() -> None:
    assert decide_start(Cursor("", 0), None, meta(first_seq=1)) == resume(0)
    assert decide_start(Cursor("old", 0), None, meta(first_seq=1)) == resume(0)
    assert decide_start(Cursor("", 0), None, meta(first_seq=2)) == snapshot("cursor_too_old")


def test_on_an_empty_stream_a_remembered_position_is_gone() -> None:
    empty = meta(epoch="", first_seq=1, last_seq=0)
    assert decide_start(Cursor("", 0), None, empty) == resume(0)
    assert decide_start(Cursor("e1", 5), None, empty) == snapshot("epoch_mismatch")
    assert decide_start(None, None, empty) == snapshot("no_position", "none")


# --- ReplayMerger ------------------------------------------------------------------------------


def seqs(entries: list[Entry]) -> list[int]:
    return [e.seq for e in entries]


def test_merger_drops_delivered_sorts_and_dedups_within_a_batch() -> None:
    merger = ReplayMerger(after_seq=3)
    assert seqs(merger.offer([entry(5), entry(2), entry(4), entry(5), entry(3)])) == [4, 5]
    assert merger.delivered == 5
    assert merger.offer([entry(4), entry(5)]) == []
    assert seqs(merger.offer([entry(6)])) == [6]


def test_merger_offer_reports_a_gap_and_takes_nothing_of_that_batch() -> None:
    merger = ReplayMerger(after_seq=3)
    with pytest.raises(GapError) as caught:
        merger.offer([entry(4), entry(6)])
    assert caught.value.gap == Gap(expected=5, got=6)
    assert merger.delivered == 3
    assert seqs(merger.offer([entry(4), entry(5), entry(6)])) == [4, 5, 6]


def test_merger_take_keeps_what_comes_before_a_gap() -> None:
    merger = ReplayMerger(after_seq=3)
    taken, gap = merger.take([entry(7), entry(4), entry(5), entry(5)])
    assert (seqs(taken), gap, merger.delivered) == ([4, 5], Gap(expected=6, got=7), 5)
    taken, gap = merger.take([entry(6), entry(7)])
    assert (seqs(taken), gap) == ([6, 7], None)


def test_merger_reaches_a_live_buffer_that_starts_at_or_before_the_next_seq() -> None:
    merger = ReplayMerger(after_seq=10)
    assert not merger.reaches([])
    assert not merger.reaches([entry(13), entry(12)])
    assert merger.reaches([entry(12), entry(11)])
    assert merger.reaches([entry(5)])


@st.composite
def overlapping_batches(draw: st.DrawFn) -> tuple[int, int, list[list[int]]]:
    """seqs 1..n cut into batches, each starting anywhere up to one past the previous batch's end (so
    they overlap or touch), each shuffled with repeats; plus a cursor."""
    n = draw(st.integers(0, 60))
    cursor = draw(st.integers(0, n + 2))
    batches: list[list[int]] = []
    end = 0
    while end < n:
        start = draw(st.integers(max(1, end - 5), end + 1))
        end = draw(st.integers(max(start, end + 1), min(n, start + 15)))  # each batch moves on
        batch = list(range(start, end + 1))
        batch += draw(st.lists(st.sampled_from(batch), max_size=4))
        draw(st.randoms(use_true_random=False)).shuffle(batch)
        batches.append(batch)
    return n, cursor, batches


@settings(max_examples=300)
@given(overlapping_batches())
def test_merger_delivers_every_seq_after_the_cursor_once_in_order(case: tuple[int, int, list[list[int]]]) -> None:
    n, cursor, batches = case
    merger = ReplayMerger(after_seq=cursor)
    out = [seq for batch in batches for seq in seqs(merger.offer([entry(s) for s in batch]))]
    assert out == list(range(cursor + 1, n + 1))


@settings(max_examples=300)
@given(overlapping_batches(), st.data())
def test_merger_reports_a_truly_missing_seq_instead_of_skipping_it(
    case: tuple[int, int, list[list[int]]], data: st.DataObject
) -> None:
    n, cursor, batches = case
    assume(cursor + 1 < n)
    missing = data.draw(st.integers(cursor + 1, n - 1))  # something after it exists, so it is detectable
    merger = ReplayMerger(after_seq=cursor)
    out: list[int] = []
    with pytest.raises(GapError) as caught:
        for batch in batches:
            out += seqs(merger.offer([entry(s) for s in batch if s != missing]))
    assert caught.value.gap.expected == missing
    assert caught.value.gap.got > missing
    assert out == list(range(cursor + 1, len(out) + cursor + 1))
    assert not out or out[-1] < missing


# --- junction_step: history pages from a simulated log, live buffered since subscribing ----------


def run_junction(
    log: list[int], live: list[int], cursor: int, page_size: int
) -> tuple[list[int], str, Gap | None]:
    """What a server does: read pages after ``merger.delivered`` from ``log`` until the junction."""
    merger = ReplayMerger(after_seq=cursor)
    sent: list[int] = []
    live_buffer = [entry(s) for s in live]
    for _ in range(len(log) + 2):
        page = [entry(s) for s in log if s > merger.delivered][:page_size]
        step = junction_step(merger, page, live_buffer, page_size)
        sent += seqs(step.entries)
        if step.next != "history":
            return sent, step.next, step.gap
    raise AssertionError("the junction did not finish")


def test_junction_switches_to_live_when_history_runs_into_the_live_buffer() -> None:
    sent, state, gap = run_junction(log=list(range(1, 21)), live=[19, 20, 18, 21, 22], cursor=4, page_size=5)
    assert (sent, state, gap) == (list(range(5, 23)), "live", None)


def test_junction_reads_history_again_when_live_lost_an_entry_history_still_has() -> None:
    live = [s for s in range(3, 31) if s != 12]
    sent, state, _ = run_junction(log=list(range(1, 31)), live=live, cursor=0, page_size=5)
    assert (sent, state) == (list(range(1, 31)), "live")


def test_junction_reports_a_gap_when_neither_history_nor_live_has_the_entry() -> None:
    sent, state, gap = run_junction(log=list(range(1, 11)), live=[12, 13], cursor=0, page_size=100)
    assert (sent, state, gap) == (list(range(1, 11)), "gap", Gap(11, 12))


def test_junction_reports_a_gap_when_the_log_was_trimmed_past_the_cursor() -> None:
    sent, state, gap = run_junction(log=list(range(20, 31)), live=[], cursor=5, page_size=10)
    assert (sent, state, gap) == ([], "gap", Gap(6, 20))


def test_junction_with_nothing_anywhere_goes_live_at_once() -> None:
    assert run_junction(log=[], live=[], cursor=0, page_size=10) == ([], "live", None)


def test_junction_refuses_a_page_size_below_one() -> None:
    with pytest.raises(ValueError, match="page_size"):
        junction_step(ReplayMerger(0), [], [], 0)


@st.composite
def log_and_live(draw: st.DrawFn) -> tuple[int, int, list[int], list[int], int, int | None]:
    """A log 1..n whose first ``history_head`` entries existed when reading began (the rest was committed
    during the replay), a live buffer from some subscription point on, with repeats and reordering, and
    maybe one seq lost from both."""
    n = draw(st.integers(0, 60))
    cursor = draw(st.integers(0, n))
    subscribed_at = draw(st.integers(1, n + 1))  # first seq committed after subscribing
    live = list(range(subscribed_at, n + 1))
    live += draw(st.lists(st.sampled_from(live), max_size=5)) if live else []
    draw(st.randoms(use_true_random=False)).shuffle(live)
    page_size = draw(st.integers(1, 12))
    missing = draw(st.none() | st.integers(1, max(1, n)))
    return n, cursor, list(range(1, n + 1)), live, page_size, missing


@settings(max_examples=400)
@given(log_and_live())
def test_junction_is_exactly_once_in_order_or_reports_the_missing_seq(
    case: tuple[int, int, list[int], list[int], int, int | None],
) -> None:
    n, cursor, log, live, page_size, missing = case
    if missing is not None:
        log = [s for s in log if s != missing]
        live = [s for s in live if s != missing]
    sent, state, gap = run_junction(log, live, cursor, page_size)
    assert sent == list(range(cursor + 1, cursor + 1 + len(sent)))
    truly_missing = missing is not None and cursor < missing < n
    if truly_missing:
        assert state == "gap"
        assert gap is not None and gap.expected == missing
        assert sent == list(range(cursor + 1, missing))
    else:
        assert (state, gap) == ("live", None)
        assert sent == list(range(cursor + 1, (n - 1 if missing == n else n) + 1))


# --- client helpers ----------------------------------------------------------------------------


def test_a_run_is_taken_whole_only_right_after_what_was_delivered() -> None:
    merger = ReplayMerger(3)
    assert not merger.take_run(5, 6) and merger.delivered == 3  # would skip seq 4
    assert not merger.take_run(3, 6) and merger.delivered == 3  # repeats seq 3
    assert not merger.take_run(4, 3) and merger.delivered == 3  # not a run
    assert merger.take_run(4, 6) and merger.delivered == 6
    assert seqs(merger.offer([entry(6), entry(7)])) == [7]


@given(st.text(max_size=8), st.integers(0, 200), st.one_of(st.none(), st.integers(0, 200)),
       st.one_of(st.none(), st.text(max_size=8)), st.text(max_size=8), st.integers(1, 100), st.integers(0, 100))
def test_a_hello_with_a_cursor_never_gets_no_position(
    cursor_epoch: str, cursor_seq: int, session_seq: int | None, session_epoch: str | None, epoch: str,
    first_seq: int, length: int,
) -> None:
    """``no_position`` means the client named no position at all: a client with a cursor may be sent a
    snapshot (epoch changed, trimmed, ahead) but never one counted as position-less — which is why a second
    ``no_position`` in the kind tests can only come from a connection before the client's first snapshot."""
    plan = decide_start(Cursor(cursor_epoch, cursor_seq), session_seq,
                        meta(epoch=epoch, first_seq=first_seq, last_seq=first_seq + length - 1),
                        session_epoch=session_epoch)
    assert plan.reset != "no_position" and plan.position_from == "cursor"


# --- fit_view (issue 43) -----------------------------------------------------------------------


def test_a_position_of_another_view_starts_from_a_snapshot() -> None:
    from sparkwire.gateway.recovery.start_plan import fit_view
    from sparkwire.protocol.filter_form import parse_filter
    from sparkwire.protocol.scope import View

    view = View(None, parse_filter({"region": "eu"}))
    assert fit_view(resume(12), view.id, view) == resume(12)
    assert fit_view(resume(12), None, None) == resume(12)
    assert fit_view(resume(0), None, view) == resume(0)  # "applied nothing" fits every view
    assert fit_view(resume(12), None, view) == snapshot("view_changed")
    assert fit_view(resume(12, "session"), view.id, None) == snapshot("view_changed", "session")
    assert fit_view(snapshot("no_position", "none"), None, view) == snapshot("no_position", "none")
