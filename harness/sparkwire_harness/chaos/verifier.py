"""The verdict of a chaos run, from what every client rendered — not from the log alone.

The log is first compared with the results computed independently from the produced events
(``sparkwire_harness.verify.compare``); then every client's render record against the log, seq by seq (so a
client that drew a wrong or a repeated result is caught, as is one that never drew one), its final state
against the log's latest result per key, and the page's points (one per window) against the expected
results themselves. Across clients, no two may have rendered different results under one seq of one epoch
(a contradiction: what a failover that lost a tail, silently refilled, would show). Counters from the
processes come last. The first problem found — the earliest
committed seq any client got wrong — makes the FAIL line, with the last fault injected before that
seq's commit.

A filtered or scoped client (``views.py``) is checked against its own oracle instead: the expected results
kept by the harness's own reading of its view (scope AND filter), in the log's seq order — each rendered
exactly once, in that order, nothing of the view missing, nothing outside it (an entry its scope excludes is
named as such), and its final state the view's latest result per key. One line per filtered client
(``Verdict.filtered_lines``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkwire.replaylog.model import Entry
from sparkwire_harness.chaos.clients import digest
from sparkwire_harness.chaos.views import BY_NAME, Profile, admits, admits_view
from sparkwire_harness.verify import WindowResult, compare


@dataclass(frozen=True)
class Problem:
    who: str
    seq: int
    what: str
    commit_ms: int = 0


@dataclass
class Verdict:
    clients: int = 0
    results: int = 0
    duplicates: int = 0
    gaps: int = 0
    lost: int = 0
    contradictions: int = 0
    """Seqs of an epoch rendered with two different results (by two clients, or one client twice)."""
    resent_after_session_resume: int = 0
    outside_view: int = 0
    """Entries a filtered client rendered that its view does not hold (outside its scope or its filter)."""
    filtered_lines: list[str] = field(default_factory=list)
    """One line per filtered or scoped client: OK, or FAIL with its first problem."""
    problems: list[Problem] = field(default_factory=list)
    counter_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.counter_problems


class LogView:
    """The committed log by seq, with each entry's digest and the latest entry per key."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.by_seq = {e.seq: (e.processing_id, digest(json.loads(e.data)), e.commit_ms) for e in entries}
        self.last_seq = max(self.by_seq, default=0)
        self.latest: dict[str, list[Any]] = {}
        self.rows: dict[int, tuple[str, Any]] = {}
        """seq -> the entry's key and data."""
        for e in entries:
            self.latest[e.key] = [e.seq, e.processing_id, self.by_seq[e.seq][1]]
            self.rows[e.seq] = (e.key, json.loads(e.data))

    def commit_ms(self, seq: int) -> int:
        return self.by_seq.get(seq, ("", 0, 0))[2]


def check_client(name: str, report: Mapping[str, Any], log: LogView, verdict: Verdict) -> None:
    """One Python client: every seq 1..N rendered once per ``ClientSession``, as the log holds it."""
    def problem(seq: int, what: str) -> None:
        verdict.problems.append(Problem(name, seq, what, log.commit_ms(seq)))

    rendered: dict[int, list[object]] = {}
    for index, segment in enumerate(report["segments"]):
        expected_next = 1 if index == 0 else None
        seen: set[object] = set()
        for seq, pid, value, *_epoch in segment:
            if expected_next is not None and seq > expected_next:
                verdict.gaps += 1
                problem(expected_next, f"jumped from seq {expected_next - 1} to {seq}")
            if pid in seen or (expected_next is not None and seq < expected_next):
                verdict.duplicates += 1  # once per entry drawn again, by seq or by processingId
                problem(seq, f"rendered seq {seq} ({pid}) again, after seq {(expected_next or 1) - 1}")
            expected_next = seq + 1
            seen.add(pid)
            want = log.by_seq.get(seq)
            if want is None or (want[0], want[1]) != (pid, value):
                problem(seq, f"rendered {pid}/{value} where the log holds {want[:2] if want else 'nothing'}")
            if seq in rendered:
                verdict.resent_after_session_resume += 1  # only across segments: a session-only resume
            rendered[seq] = [pid, value]
    missing = [seq for seq in range(1, log.last_seq + 1) if seq not in rendered]
    if missing:
        verdict.lost += len(missing)
        problem(missing[0], f"never rendered ({len(missing)} seqs from {missing[0]} on)")
    for key, item in log.latest.items():
        if report["state"].get(key) != item:
            problem(int(item[0]), f"final state of {key} is {report['state'].get(key)}, the log's latest is {item}")
    _check_sessions(report, problem)


def _check_sessions(report: Mapping[str, Any], problem: Any) -> None:
    """The client's own counters: no duplicate or gap seen, no snapshot but the first, no terminal close."""
    for session in report["sessions"]:
        if session["duplicates"] or session["gaps"]:
            problem(0, f"client counted {session['duplicates']} duplicates and {session['gaps']} gaps")
        resets = {reason: n for reason, n in session["resets"].items() if reason != "no_position"}
        if resets:
            problem(0, f"restarted from a snapshot: {resets}")
    if report.get("terminal"):
        problem(0, f"ended by a terminal close: {report['terminal']}")


def expected_document(result: WindowResult) -> dict[str, Any]:
    """An expected result as the aggregator writes it (docs/replay-log.md): what a filter is evaluated on."""
    return {"metricName": result.metric, "windowStart": result.window_start, "windowEnd": result.window_end,
            "count": result.count, "sum": result.total, "min": result.minimum, "max": result.maximum,
            "avg": result.average}


def view_oracle(profile: Profile, expected: Mapping[str, WindowResult], log: LogView) -> list[int]:
    """The seqs a client of ``profile`` must render, in order: the expected results its view admits (the
    harness's reading of the filter form on the independently computed results), where the log holds them
    (an expected result the log lacks is the log's problem, reported as such)."""
    admitted = {pid for pid, result in expected.items()
                if admits_view(profile, result.metric, expected_document(result))}
    return sorted(seq for seq, (pid, _, _) in log.by_seq.items() if pid in admitted)


def outside(profile: Profile, row: tuple[str, Any] | None) -> str:
    """Why an entry is not in the view: not in the log, outside the scope, or outside the filter."""
    if row is None:
        return "which the log does not hold"
    if not admits(profile.scope, *row):
        return "outside its scope"
    return "outside its filter" if not admits(profile.filter, *row) else "outside its view"


def check_filtered_client(name: str, report: Mapping[str, Any], profile: Profile,
                          expected: Mapping[str, WindowResult], log: LogView, verdict: Verdict) -> None:
    """A filtered or scoped client against its own oracle (``view_oracle``): every result of its view once per
    ``ClientSession`` in seq order, nothing else; its final state the view's latest result per key; no
    removal (the metrics stream is append mode)."""
    found: list[Problem] = []

    def problem(seq: int, what: str) -> None:
        found.append(Problem(name, seq, what, log.commit_ms(seq)))

    want = view_oracle(profile, expected, log)
    position = {seq: index for index, seq in enumerate(want)}
    rendered: set[int] = set()
    for index, segment in enumerate(report["segments"]):
        previous: int | None = -1 if index == 0 else None  # index in ``want`` of the last one rendered
        seen: set[object] = set()
        for seq, pid, value, *_epoch in segment:
            at = position.get(seq)
            if at is None:
                verdict.outside_view += 1
                problem(seq, f"rendered seq {seq} ({pid}), {outside(profile, log.rows.get(seq))}")
                continue
            if pid in seen or (previous is not None and at <= previous):
                verdict.duplicates += 1
                problem(seq, f"rendered seq {seq} ({pid}) again")
            elif previous is not None and at > previous + 1:
                verdict.gaps += 1
                problem(want[previous + 1], f"jumped from seq {want[previous] if previous >= 0 else 0} to {seq}, "
                                            f"over {at - previous - 1} results of its view")
            previous = at if previous is None else max(previous, at)
            seen.add(pid)
            held = log.by_seq.get(seq)
            if held is None or (held[0], held[1]) != (pid, value):
                problem(seq, f"rendered {pid}/{value} where the log holds {held[:2] if held else 'nothing'}")
            if seq in rendered:
                verdict.resent_after_session_resume += 1
            rendered.add(seq)
    missing = [seq for seq in want if seq not in rendered]
    if missing:
        verdict.lost += len(missing)
        problem(missing[0], f"never rendered {len(missing)} results of its view, from seq {missing[0]} on")
    latest: dict[str, list[Any]] = {}
    for seq in want:
        latest[log.rows[seq][0]] = [seq, log.by_seq[seq][0], log.by_seq[seq][1]]
    state = report["state"]
    for key in sorted(set(latest) | set(state)):
        if state.get(key) != latest.get(key):
            problem(int((latest.get(key) or state[key])[0]),
                    f"final state of {key} is {state.get(key)}, its view's latest is {latest.get(key)}")
    if report.get("removals"):
        problem(int(report["removals"][0][0]), f"got {len(report['removals'])} removals from an append-mode stream")
    _check_sessions(report, problem)
    verdict.problems += found
    label = f"filtered client {report['id']} ({report['kind']}, {report['edge']}, {profile.name})"
    if found:
        first = min(found, key=lambda p: (p.commit_ms == 0, p.commit_ms, p.seq))
        verdict.filtered_lines.append(f"{label}: FAIL, {len(found)} problems, first: seq {first.seq}: {first.what}")
    else:
        verdict.filtered_lines.append(f"{label}: OK exactly once, {len(want):,} of the log's {len(log.by_seq):,} "
                                      f"results in its view, {len(latest)} keys at the end")


def check_contradictions(clients: Sequence[Mapping[str, Any]], log: LogView, verdict: Verdict) -> None:
    """Every (epoch, seq) any client rendered, with one result: the first client's stands, later ones that
    differ are contradictions. Independent of the final log, which a lost tail could have rewritten."""
    seen: dict[tuple[str, int], tuple[object, object, str]] = {}
    for client in clients:
        who = f"client {client['id']} ({client['kind']}, {client['edge']})"
        for segment in client["segments"]:
            for seq, pid, value, *epoch in segment:
                key = (str(epoch[0]) if epoch else "", int(seq))
                first = seen.setdefault(key, (pid, value, who))
                if (first[0], first[1]) != (pid, value):
                    verdict.contradictions += 1
                    verdict.problems.append(Problem(who, seq, f"rendered {pid}/{value} under epoch {key[0]!r} seq "
                                                              f"{seq}, where {first[2]} rendered {first[0]}/{first[1]}",
                                                    log.commit_ms(seq)))


def _close(a: object, b: float) -> bool:
    return isinstance(a, int | float) and math.isclose(float(a), b, rel_tol=1e-9, abs_tol=1e-9)


def check_page(report: Mapping[str, Any], expected: Mapping[str, WindowResult], log: LogView,
               verdict: Verdict) -> None:
    """The dashboard: one point per expected window with its values; each page life applied seqs in
    order without repeats; the page's own counters."""
    def problem(seq: int, what: str) -> None:
        verdict.problems.append(Problem("page", seq, what, log.commit_ms(seq)))

    seq_of = {pid: seq for seq, (pid, _, _) in log.by_seq.items()}
    points = [point for series in report["series"].values() for point in series]
    drawn = {point["processingId"]: point for point in points}
    if len(drawn) != len(points):
        verdict.duplicates += len(points) - len(drawn)
        problem(0, f"{len(points) - len(drawn)} windows drawn twice")
    undrawn = sorted(set(expected) - set(drawn), key=lambda p: seq_of.get(p, 0))
    if undrawn:
        verdict.lost += len(undrawn)
        problem(seq_of.get(undrawn[0], 0), f"{len(undrawn)} windows never drawn, e.g. {undrawn[0]}")
    for pid, point in drawn.items():
        want = expected.get(pid)
        if want is None:
            problem(seq_of.get(pid, 0), f"drew {pid}, which is no expected window")
        elif point["count"] != want.count or not all(
                _close(point[name], value) for name, value in (("avg", want.average), ("min", want.minimum),
                                                                ("max", want.maximum))):
            problem(seq_of.get(pid, 0), f"drew {pid} as {point}, expected {want}")
    covered: set[int] = set()
    for life, applied in enumerate(report["lives"]):
        seqs = [seq for seq, _ in applied]
        if len(set(seqs)) != len(seqs) or seqs != sorted(seqs):
            verdict.duplicates += len(seqs) - len(set(seqs))
            problem(0, f"page life {life} applied seqs out of order or twice")
        for previous, seq in itertools.pairwise(seqs):
            if seq != previous + 1:
                verdict.gaps += 1
                problem(previous + 1, f"page life {life} jumped from seq {previous} to {seq}")
                break
        covered.update(seqs)
    missing = [seq for seq in range(1, log.last_seq + 1) if seq not in covered]
    if missing:
        problem(missing[0], f"no page life applied seq {missing[0]} ({len(missing)} seqs missing)")
    stats = report["stats"]
    if stats["duplicates"] or stats["gaps"] or stats.get("terminal"):
        problem(0, f"page client counters: {stats}")
    if report.get("chartError") or any(line.startswith("[pageerror]") for line in report.get("console", [])):
        problem(0, f"page errors: {report.get('chartError')} {report.get('console')}")


def verify(expected: Mapping[str, WindowResult], entries: Sequence[Entry], clients: Sequence[Mapping[str, Any]],
           page: Mapping[str, Any] | None, counter_problems: list[str],
           profiles: Mapping[str, Profile] = BY_NAME) -> Verdict:
    verdict = Verdict(clients=len(clients) + (page is not None), results=len(expected))
    report = compare(expected, list(entries))
    log = LogView(entries)
    if not report.ok:
        first = min((e.seq for e in entries), default=0)
        verdict.problems.append(Problem("log", first, f"the log is not the expected results: {report.summary()}"))
    for client in clients:
        name = f"client {client['id']} ({client['kind']}, {client['edge']})"
        if client.get("profile"):
            check_filtered_client(name, client, profiles[client["profile"]], expected, log, verdict)
        else:
            check_client(name, client, log, verdict)
    check_contradictions(clients, log, verdict)
    if page is not None:
        check_page(page, expected, log, verdict)
    verdict.counter_problems = counter_problems
    return verdict


def first_problem(verdict: Verdict) -> Problem | None:
    """The problem at the earliest commit (seq-less ones last): what went wrong first."""
    ranked = sorted(verdict.problems, key=lambda p: (p.commit_ms == 0, p.commit_ms, p.seq))
    return ranked[0] if ranked else None


def verdict_line(verdict: Verdict, fault_counts: Mapping[str, int], fault_before: str | None) -> str:
    faults = sum(fault_counts.values())
    kinds = ", ".join(f"{name} {n}" for name, n in fault_counts.items() if n)
    tally = (f"{verdict.duplicates} duplicates, {verdict.gaps} gaps, {verdict.lost} lost, "
             f"{verdict.contradictions} contradictions")
    if verdict.ok:
        return (f"OK exactly once: {verdict.clients} clients x {verdict.results:,} results, {faults} faults ({kinds}), "
                f"{tally}")
    first = first_problem(verdict)
    if first is not None:
        where = f"{first.who}, seq {first.seq}: {first.what}" + (f"; last fault before it: {fault_before}"
                                                                 if fault_before else "")
        return f"FAIL: {where} ({len(verdict.problems)} problems; {tally})"
    return f"FAIL: counters: {'; '.join(verdict.counter_problems)} ({tally})"
