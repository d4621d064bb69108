"""The verdict from what clients rendered: each of these fails the run, with the first client and seq
named, and a clean render passes it."""

from __future__ import annotations

import json
from typing import Any

from sparkwire.replaylog.model import Entry
from sparkwire_harness.chaos.clients import digest
from sparkwire_harness.chaos.verifier import LogView, first_problem, verdict_line, verify, view_oracle
from sparkwire_harness.chaos.views import Profile
from sparkwire_harness.verify import WindowResult

COUNTS = {"driver": 1, "gateway": 2, "redis": 0, "kafka": 1, "net": 3, "client": 0}


def results() -> list[WindowResult]:
    return [WindowResult(metric, end - 1000, end, 2, 3.0 * n, 1.0, 2.0 * n)
            for end in (2000, 3000) for n, metric in enumerate(("a", "b", "c"), start=1)]


def payload(result: WindowResult) -> dict[str, Any]:
    return {"processingId": result.processing_id, "metricName": result.metric, "windowStart": result.window_start,
            "windowEnd": result.window_end, "count": result.count, "sum": result.total, "min": result.minimum,
            "max": result.maximum, "avg": result.average}


def log() -> list[Entry]:
    return [Entry(seq, r.processing_id, r.metric, json.dumps(payload(r)), 1_000 * seq, seq // 3)
            for seq, r in enumerate(results(), start=1)]


def expected() -> dict[str, WindowResult]:
    return {r.processing_id: r for r in results()}


def rendered(seqs: list[int], epoch: str = "e1") -> list[list[object]]:
    by_seq = {e.seq: e for e in log()}
    return [[seq, by_seq[seq].processing_id, digest(json.loads(by_seq[seq].data)), epoch] for seq in seqs]


def client(segments: list[list[int]], **changes: Any) -> dict[str, Any]:
    state = {e.key: [e.seq, e.processing_id, digest(json.loads(e.data))] for e in log()}
    report = {"id": 3, "kind": "steady", "edge": "edge-1", "segments": [rendered(s) for s in segments],
              "state": state, "sessions": [{"duplicates": 0, "gaps": 0, "resets": {"no_position": 1}}],
              "terminal": None}
    report.update(changes)
    return report


def page(**changes: Any) -> dict[str, Any]:
    series: dict[str, list[dict[str, Any]]] = {}
    for r in results():
        series.setdefault(r.metric, []).append({**payload(r)})
    report = {"series": series, "lives": [[[e.seq, e.processing_id] for e in log()]],
              "stats": {"duplicates": 0, "gaps": 0, "terminal": None}, "chartError": None, "console": []}
    report.update(changes)
    return report


def line(clients: list[dict[str, Any]], page_report: dict[str, Any] | None = None,
         counters: list[str] | None = None) -> str:
    verdict = verify(expected(), log(), clients, page_report, counters or [])
    return verdict_line(verdict, COUNTS, "#4 +12.0s  driver-kill aggregator")


def test_every_client_rendering_every_result_once_is_ok() -> None:
    assert line([client([[1, 2, 3, 4, 5, 6]])], page()) == (
        "OK exactly once: 2 clients x 6 results, 7 faults (driver 1, gateway 2, kafka 1, net 3), "
        "0 duplicates, 0 gaps, 0 lost, 0 contradictions")


def test_a_result_never_rendered_fails_naming_the_client_the_seq_and_the_fault_before() -> None:
    text = line([client([[1, 2, 3, 4, 5, 6]]), client([[1, 2, 3, 5, 6]], id=9)])
    assert text.startswith("FAIL: client 9 (steady, edge-1), seq 4: jumped from seq 3 to 5")
    assert "last fault before it: #4 +12.0s  driver-kill aggregator" in text
    assert text.endswith("0 duplicates, 1 gaps, 1 lost, 0 contradictions)")


def test_a_result_rendered_twice_fails() -> None:
    text = line([client([[1, 2, 3, 3, 4, 5, 6]])])
    assert text.startswith("FAIL: client 3 (steady, edge-1), seq 3: rendered seq 3 (")
    assert "1 duplicates" in text


def test_a_wrong_value_fails_even_when_seqs_and_ids_are_right() -> None:
    report = client([[1, 2, 3, 4, 5, 6]])
    report["segments"][0][4][2] = 12345
    assert "seq 5: rendered" in line([report])


def test_a_session_only_resume_may_hand_back_what_the_client_holds_but_nothing_else() -> None:
    verdict = verify(expected(), log(), [client([[1, 2, 3, 4], [3, 4, 5, 6]])], None, [])
    assert verdict.ok and verdict.resent_after_session_resume == 2
    assert line([client([[1, 2, 3, 4], [6]])]).startswith("FAIL: client 3 (steady, edge-1), seq 5: never rendered")


def test_a_stale_final_state_or_a_reset_or_the_clients_own_counters_fail() -> None:
    stale = client([[1, 2, 3, 4, 5, 6]])
    stale["state"]["a"] = rendered([1])[0]
    assert "final state of a" in line([stale])
    reset = client([[1, 2, 3, 4, 5, 6]], sessions=[{"duplicates": 0, "gaps": 1, "resets": {"cursor_too_old": 1}}])
    text = line([reset])
    assert "FAIL" in text and "client counted 0 duplicates and 1 gaps" in text
    verdict = verify(expected(), log(), [reset], None, [])
    assert any("restarted from a snapshot" in p.what for p in verdict.problems)


def test_the_page_must_draw_every_window_once_with_its_values() -> None:
    missing = page()
    missing["series"]["b"].pop()
    assert "1 windows never drawn" in line([], missing)
    doubled = page()
    doubled["series"]["a"].append(dict(doubled["series"]["a"][0]))
    assert "windows drawn twice" in line([], doubled)
    wrong = page()
    wrong["series"]["c"][0]["avg"] += 0.5
    assert "drew " in line([], wrong) and "expected WindowResult" in line([], wrong)
    repeated = page(lives=[[[1, "x"], [2, "y"], [2, "y"]]])
    assert "FAIL: page" in line([], repeated)


def test_a_log_that_is_not_the_expected_results_fails_before_any_client() -> None:
    short = log()[:-1]
    verdict = verify(expected(), short, [], None, [])
    first = first_problem(verdict)
    assert first is not None and first.who == "log" and "missing=1" in first.what


def test_counter_problems_alone_fail_the_run() -> None:
    text = line([client([[1, 2, 3, 4, 5, 6]])], None, ["sparkwire_client_reported_gaps_total = 2 (expected 0)"])
    assert text == ("FAIL: counters: sparkwire_client_reported_gaps_total = 2 (expected 0) "
                    "(0 duplicates, 0 gaps, 0 lost, 0 contradictions)")


def test_two_clients_that_rendered_different_results_under_one_seq_of_one_epoch_are_a_contradiction() -> None:
    """What a lost tail refilled with other results would show: the final log agrees with one of them only,
    so the client holding the other is wrong too — but the contradiction is named for what it is."""
    other = client([[1, 2, 3, 4, 5, 6]], id=9)
    other["segments"][0][3][2] = 777  # seq 4 rendered with another value
    verdict = verify(expected(), log(), [client([[1, 2, 3, 4, 5, 6]]), other], None, [])
    assert verdict.contradictions == 1 and not verdict.ok
    assert any("under epoch 'e1' seq 4, where client 3 (steady, edge-1) rendered" in p.what for p in verdict.problems)
    assert verdict_line(verdict, COUNTS, None).endswith("1 contradictions)")


def test_the_same_seq_in_two_epochs_may_hold_different_results() -> None:
    """A new epoch (a rebuilt log: clients resync by snapshot) renumbers; only one epoch's seqs must agree."""
    later = client([[1, 2, 3, 4, 5, 6]], id=9)
    later["segments"] = [rendered([1, 2, 3], "e1"), rendered([4, 5, 6], "e1")]
    moved = [[seq, pid, value, "e2"] for seq, pid, value, _ in rendered([1, 2], "e1")]
    moved[0][2] = 555
    later["segments"].append(moved)
    verdict = verify(expected(), log(), [client([[1, 2, 3, 4, 5, 6]]), later], None, [])
    assert verdict.contradictions == 0


# Filtered and scoped clients, each against its own oracle: the expected results its view admits.
PROFILES = {"keys": Profile("keys", filter={"$key": {"in": ["a", "c"]}}),  # seqs 1, 3, 4, 6
            "scoped": Profile("scoped", scope={"metricName": "b"}),  # seqs 2, 5
            "scoped+max": Profile("scoped+max", scope={"$key": {"in": ["b", "c"]}}, filter={"max": {"ge": 6}})}  # 3, 6


def filtered(profile: str, segments: list[list[int]], **changes: Any) -> dict[str, Any]:
    view = {1: [1, 3, 4, 6], 2: [2, 5], 3: [3, 6]}[list(PROFILES).index(profile) + 1]
    by_seq = {e.seq: e for e in log()}
    state = {by_seq[s].key: [s, by_seq[s].processing_id, digest(json.loads(by_seq[s].data))] for s in view}
    return client(segments, **{"id": 5, "profile": profile, "state": state, "removals": [], **changes})


def filtered_verdict(*clients: dict[str, Any]) -> Any:
    return verify(expected(), log(), list(clients), None, [], profiles=PROFILES)


def test_filtered_and_scoped_clients_rendering_their_views_once_are_ok_each_with_its_line() -> None:
    verdict = filtered_verdict(client([[1, 2, 3, 4, 5, 6]]), filtered("keys", [[1, 3, 4, 6]]),
                               filtered("scoped", [[2, 5]], id=6), filtered("scoped+max", [[3, 6]], id=7))
    assert verdict.ok, verdict.problems
    assert verdict.filtered_lines == [
        "filtered client 5 (steady, edge-1, keys): OK exactly once, 4 of the log's 6 results in its view, 2 keys at "
        "the end",
        "filtered client 6 (steady, edge-1, scoped): OK exactly once, 2 of the log's 6 results in its view, 1 keys "
        "at the end",
        "filtered client 7 (steady, edge-1, scoped+max): OK exactly once, 2 of the log's 6 results in its view, 1 "
        "keys at the end"]
    assert verdict_line(verdict, COUNTS, None).startswith("OK exactly once: 4 clients x 6 results")


def test_the_oracle_is_the_expected_results_filtered_not_the_log() -> None:
    """A result the log lacks is not asked of the client (the log's own check fails the run), and the filter
    is evaluated on the independently computed values."""
    profile = Profile("many", filter={"count": 2, "sum": {"gt": 3.5}, "region": {"isNull": True}})
    assert view_oracle(profile, expected(), LogView(log())) == [2, 3, 5, 6]
    assert view_oracle(profile, expected(), LogView(log()[:4])) == [2, 3]


def test_a_filtered_client_that_got_an_extra_entry_fails() -> None:
    verdict = filtered_verdict(filtered("keys", [[1, 2, 3, 4, 6]]))
    assert not verdict.ok and verdict.outside_view == 1
    assert verdict.filtered_lines[0].startswith("filtered client 5 (steady, edge-1, keys): FAIL, 1 problems, "
                                                "first: seq 2: rendered seq 2 (")
    assert verdict.filtered_lines[0].endswith("outside its filter")
    assert verdict_line(verdict, COUNTS, None).startswith("FAIL: client 5 (steady, edge-1), seq 2: rendered seq 2")


def test_a_filtered_client_that_missed_an_entry_of_its_view_fails() -> None:
    verdict = filtered_verdict(filtered("keys", [[1, 3, 6]]))
    assert not verdict.ok and verdict.gaps == 1 and verdict.lost == 1
    assert "FAIL" in verdict.filtered_lines[0] and "jumped from seq 3 to 6, over 1 results of its view" in \
        verdict.filtered_lines[0]
    tail = filtered_verdict(filtered("keys", [[1, 3, 4]]))  # the last one never came
    assert any("never rendered 1 results of its view, from seq 6 on" in p.what for p in tail.problems)
    first = filtered_verdict(filtered("scoped", [[5]]))  # the first one never came
    assert any("jumped from seq 0 to 5" in p.what for p in first.problems)


def test_a_scoped_client_that_got_an_entry_outside_its_scope_fails_naming_the_scope() -> None:
    verdict = filtered_verdict(filtered("scoped", [[2, 4, 5]]))
    assert not verdict.ok and verdict.outside_view == 1
    assert any(p.seq == 4 and p.what.endswith("outside its scope") for p in verdict.problems)
    # within the scope but not the client's own filter: named as the filter's
    within = filtered_verdict(filtered("scoped+max", [[2, 3, 6]]))
    assert any(p.seq == 2 and p.what.endswith("outside its filter") for p in within.problems)


def test_a_filtered_client_rendering_twice_out_of_order_or_a_wrong_value_fails() -> None:
    assert filtered_verdict(filtered("keys", [[1, 3, 3, 4, 6]])).duplicates == 1
    assert not filtered_verdict(filtered("keys", [[1, 4, 3, 6]])).ok
    wrong = filtered("keys", [[1, 3, 4, 6]])
    wrong["segments"][0][1][2] = 4242
    assert any("rendered" in p.what and "where the log holds" in p.what for p in filtered_verdict(wrong).problems)


def test_a_filtered_session_only_resume_may_hand_back_what_it_holds_but_must_not_skip() -> None:
    verdict = filtered_verdict(filtered("keys", [[1, 3], [3, 4, 6]], kind="session"))
    assert verdict.ok and verdict.resent_after_session_resume == 1
    skipped = filtered_verdict(filtered("keys", [[1, 3], [6]], kind="session"))
    assert any("never rendered 1 results of its view, from seq 4 on" in p.what for p in skipped.problems)


def test_a_filtered_clients_final_state_is_its_views_latest_and_no_removal_comes_in_append_mode() -> None:
    extra_key = filtered("scoped", [[2, 5]])
    extra_key["state"]["a"] = [4, log()[3].processing_id, 0]
    assert any("final state of a is" in p.what for p in filtered_verdict(extra_key).problems)
    stale = filtered("keys", [[1, 3, 4, 6]])
    stale["state"]["a"] = [1, log()[0].processing_id, digest(json.loads(log()[0].data))]
    assert not filtered_verdict(stale).ok
    removed = filtered("keys", [[1, 3, 4, 6]], removals=[[4, "a"]])
    assert any("removals from an append-mode stream" in p.what for p in filtered_verdict(removed).problems)
    reset = filtered("keys", [[1, 3, 4, 6]], sessions=[{"duplicates": 0, "gaps": 0, "resets": {"view_changed": 1}}])
    assert any("restarted from a snapshot" in p.what for p in filtered_verdict(reset).problems)
