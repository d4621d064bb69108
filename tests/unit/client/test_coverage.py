"""The client's coverage check for a filtered subscription, against the reference server (``ViewFeed``):
every frame a correct server sends is accepted, every dropped one is detected, repeats are dropped, and
through drops, repeats and reconnects from any covered position the client ends with exactly its view."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

from hypothesis import event, given, settings
from hypothesis import strategies as st

from sparkwire.client.coverage import ViewCoverage, apply_items
from sparkwire.protocol.filter_form import FilterError, parse_filter
from sparkwire.protocol.items import Entry, StateItem
from sparkwire.protocol.scope import ScopeViolation, View, make_view
from sparkwire.protocol.server_frames import ReceivedEntry, parse_server_frame
from sparkwire.protocol.view_feed import CompiledView, ViewFeed, compile_view, encode_view_frame
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame

from ..protocol.filter_strategies import keys, naive_matches, results, scopes, useful_filters

D = "0123456789abcdef"


def frame(after: int, through: int, *seqs: int) -> ViewEntriesFrame:
    return ViewEntriesFrame("e", after, through, D, tuple(Removal(seq, "k") for seq in seqs))


def test_a_frame_is_next_when_it_starts_at_or_before_covered_and_ends_after_it() -> None:
    coverage = ViewCoverage(10)
    assert coverage.observe(frame(10, 15, 12)).fresh == (Removal(12, "k"),)
    assert coverage.observe(frame(12, 20, 14, 18)).fresh == (Removal(18, "k"),)  # 14 is a repeat
    assert (coverage.covered, coverage.duplicates, coverage.gaps) == (20, 1, 0)
    assert coverage.observe(frame(15, 20, 18)).verdict == "duplicate"
    assert coverage.observe(frame(21, 25)).verdict == "gap"
    assert (coverage.covered, coverage.duplicates, coverage.gaps) == (20, 2, 1)
    coverage.reset(30, D)
    assert coverage.observe(frame(30, 31)).verdict == "next"


def test_removals_of_keys_not_held_are_no_ops() -> None:
    state = {"k": StateItem(1, "p1", {})}
    assert apply_items(state, (Removal(5, "k"), Removal(6, "k"), Removal(7, "other"))) == [Removal(5, "k")]
    assert state == {}


# --- the property: a random log, view, split into runs, and faults --------------------------------------


def _log(rows: list[tuple[str, object]]) -> list[Entry]:
    return [Entry(seq=i + 1, processing_id=f"p{i + 1}", key=key, data=json.dumps(data), commit_ms=0, batch_id=i)
            for i, (key, data) in enumerate(rows)]


def _oracle(log: list[Entry], scope: dict[str, object] | None, own: dict[str, object] | None,
            removals: bool) -> tuple[list[int], dict[str, int], int]:
    """Written from the spec, by the naive evaluator: the seqs delivered, the state (key -> seq), and how
    many times a held key is removed."""
    delivered, state, removed = [], {}, 0
    for e in log:
        data = json.loads(e.data)
        if scope is not None and not naive_matches(scope, e.key, data):
            continue
        if own is None or naive_matches(own, e.key, data):
            delivered.append(e.seq)
            state[e.key] = e.seq
        elif removals and state.pop(e.key, None) is not None:
            removed += 1
    return delivered, state, removed


@dataclass
class Client:
    coverage: ViewCoverage = field(default_factory=ViewCoverage)
    state: dict[str, StateItem] = field(default_factory=dict)
    applied: list[int] = field(default_factory=list)
    removed: int = 0

    def receive(self, text: str) -> str:
        parsed = parse_server_frame(text)
        assert isinstance(parsed, ViewEntriesFrame)
        covered = self.coverage.observe(parsed)
        for item in apply_items(self.state, covered.fresh):
            if isinstance(item, ReceivedEntry):
                self.applied.append(item.seq)
            else:
                self.removed += 1
        return covered.verdict


def _serve(view: CompiledView, log: list[Entry], after: int, cuts: list[int], max_bytes: int) -> list[str]:
    """A correct server's frames for one connection starting after ``after``: the rest of the log in runs
    (cut where ``cuts`` says), a clock that makes some position frames due, and a flush at the end."""
    feed = ViewFeed(view, after, now_ms=0)
    texts: list[str] = []
    rest = log[after:]
    bounds = sorted({0, len(rest), *(c % (len(rest) + 1) for c in cuts)})
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        for f in feed.offer(rest[start:end], now_ms=700 * (i + 1)):
            texts += encode_view_frame("e", f, max_frame_bytes=max_bytes)
    for f in feed.flush(now_ms=10**9):
        texts += encode_view_frame("e", f, max_frame_bytes=max_bytes)
    return texts


VIEWS = st.tuples(scopes(), useful_filters() | st.none(), st.booleans())
CUTS = st.lists(st.integers(0, 60), min_size=2, max_size=20)


def _view(scope: dict[str, object] | None, own: dict[str, object] | None, removals: bool) -> CompiledView | None:
    try:
        view = make_view(None if scope is None else parse_filter(scope), None if own is None else parse_filter(own))
    except (FilterError, ScopeViolation):
        return None
    return compile_view(view or View(None, None), removals=removals)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(keys(), results()), min_size=8, max_size=60), VIEWS,
       CUTS, st.sampled_from((300, 1 << 20)))
def test_a_correct_server_s_frames_are_all_accepted_and_make_exactly_the_view(
    rows: list[tuple[str, object]], views: tuple[dict[str, object] | None, dict[str, object] | None, bool],
    cuts: list[int], max_bytes: int,
) -> None:
    scope, own, removals = views
    view = _view(scope, own, removals)
    if view is None:
        return
    log = _log(rows)
    client = Client()
    for text in _serve(view, log, 0, cuts, max_bytes):
        assert client.receive(text) == "next"
    delivered, state, removed = _oracle(log, scope, own, removals)
    assert client.applied == delivered
    assert {key: item.seq for key, item in client.state.items()} == state
    assert client.removed == removed
    assert client.coverage.covered == len(log)
    assert client.coverage.digest == log[-1].digest


FAULTS = st.lists(st.sampled_from(("ok", "ok", "drop", "repeat", "reconnect")), min_size=10, max_size=80)


def _resume_through_faults(
    view: CompiledView, log: list[Entry], cuts: list[int], faults: list[str]
) -> Client:
    """Connections from the client's coverage, each frame delivered, dropped, repeated, or the connection
    ended, until the client covers the log."""
    client = Client()
    pending = iter(faults)
    for _ in range(len(faults) + 2):  # each connection uses up at least one fault, or runs clean to the end
        # Reconnect from wherever the client's coverage is: the server starts there, knowing no key's past.
        dropped = False
        for text in _serve(view, log, client.coverage.covered, cuts, 300):
            fault = next(pending, "ok")
            if fault == "reconnect":
                break
            if fault == "drop":
                dropped = True
                continue
            covered_before = client.coverage.covered
            verdict = client.receive(text)
            if dropped:
                # The first frame after a lost one is a gap, whatever the lost one carried.
                assert verdict == "gap"
                assert client.coverage.covered == covered_before
                break
            assert verdict == "next"
            if fault == "repeat":
                assert client.receive(text) == "duplicate"
        if client.coverage.covered == len(log):
            break
    assert client.coverage.covered == len(log)
    return client


def _check_view(client: Client, log: list[Entry], scope: dict[str, object] | None, own: dict[str, object] | None,
                removals: bool) -> None:
    delivered, state, removed = _oracle(log, scope, own, removals)
    assert client.applied == delivered  # every entry of the view once, in seq order
    assert {key: item.seq for key, item in client.state.items()} == state
    assert client.removed == removed  # a held key removed once per move-out, whatever the resumes repeated
    event(f"gaps seen: {min(client.coverage.gaps, 2)}, removals: {min(removed, 2)}, "
          f"delivered some but not all: {0 < len(delivered) < len(log)}")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(keys(), results()), min_size=8, max_size=60), VIEWS, CUTS, FAULTS)
def test_through_drops_repeats_and_reconnects_every_loss_is_seen_and_the_view_is_exact(
    rows: list[tuple[str, object]], views: tuple[dict[str, object] | None, dict[str, object] | None, bool],
    cuts: list[int], faults: list[str],
) -> None:
    scope, own, removals = views
    view = _view(scope, own, removals)
    if view is None:
        event("refused view")
        return
    log = _log(rows)
    _check_view(_resume_through_faults(view, log, cuts, faults), log, scope, own, removals)


MOVING = st.fixed_dictionaries({"a": st.sampled_from(("x", "x", "y")), "c": st.sampled_from((0, 0, 0, None))})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(keys(), MOVING), min_size=8, max_size=60), CUTS, FAULTS)
def test_update_mode_moves_keys_in_and_out_once_through_faults(
    rows: list[tuple[str, object]], cuts: list[int], faults: list[str]
) -> None:
    # Keys flip between matching (a = x) and not, and now and then leave the scope (c null).
    scope: dict[str, object] = {"c": {"isNull": False}}
    own: dict[str, object] = {"a": "x"}
    view = _view(scope, own, True)
    assert view is not None
    log = _log(rows)
    _check_view(_resume_through_faults(view, log, cuts, faults), log, scope, own, True)
