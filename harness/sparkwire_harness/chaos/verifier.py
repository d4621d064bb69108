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
        for e in entries:
            self.latest[e.key] = [e.seq, e.processing_id, self.by_seq[e.seq][1]]

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
    for session in report["sessions"]:
        if session["duplicates"] or session["gaps"]:
            problem(0, f"client counted {session['duplicates']} duplicates and {session['gaps']} gaps")
        resets = {reason: n for reason, n in session["resets"].items() if reason != "no_position"}
        if resets:
            problem(0, f"restarted from a snapshot: {resets}")
    if report.get("terminal"):
        problem(0, f"ended by a terminal close: {report['terminal']}")


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
           page: Mapping[str, Any] | None, counter_problems: list[str]) -> Verdict:
    verdict = Verdict(clients=len(clients) + (page is not None), results=len(expected))
    report = compare(expected, list(entries))
    log = LogView(entries)
    if not report.ok:
        first = min((e.seq for e in entries), default=0)
        verdict.problems.append(Problem("log", first, f"the log is not the expected results: {report.summary()}"))
    for client in clients:
        check_client(f"client {client['id']} ({client['kind']}, {client['edge']})", client, log, verdict)
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
