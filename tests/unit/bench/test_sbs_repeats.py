"""bench/_sbs_repeats.py and bench/_sbs_aims.py: the side-by-side benchmark's repeats: the servers' order in
each pass, medians, the spread of a ratio to the peer over the repeats, the exactly-once cell, and an aim met
only when every repeat meets it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import _sbs_aims
import _sbs_report
from _sbs_measure import Idle, Kill, Outcome, Phase
from _sbs_repeats import (
    median,
    median_range,
    once_text,
    paired_ratios,
    per_repeat,
    ratio_summary,
    run_order,
    spread,
    verdict,
)

SERVERS = ["sparkwire", "centrifuge", "naive"]
NAN = float("nan")


def test_each_pass_starts_every_count_with_another_server() -> None:
    for index in range(3):
        orders = [run_order(SERVERS, repeat, index) for repeat in range(3)]
        assert all(sorted(order) == sorted(SERVERS) for order in orders)
        assert sorted(order[0] for order in orders) == sorted(SERVERS), "each server first once in 3 passes"
        assert sorted(order[-1] for order in orders) == sorted(SERVERS), "each server last once in 3 passes"
        assert orders[0][0] != orders[1][0]
    assert run_order(SERVERS, 0) == SERVERS, "the first pass's first count keeps the given order"
    assert run_order(SERVERS, 1, 0) == ["centrifuge", "naive", "sparkwire"]
    assert run_order(SERVERS, 0, 1) == run_order(SERVERS, 1, 0), "one more per count and per pass"
    two = [run_order(["a", "b"], repeat) for repeat in range(2)]
    assert two == [["a", "b"], ["b", "a"]]
    assert run_order([], 2) == []


def test_median_leaves_out_a_repeat_that_measured_nothing() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 10.0, 20.0]) == 6.0
    assert median([NAN, 5.0, 1.0]) == 3.0
    assert math.isnan(median([NAN, float("inf")]))
    assert math.isnan(median([]))


def test_ratios_pair_each_repeat_with_the_peer_in_the_same_repeat() -> None:
    assert paired_ratios({1: 10.0, 2: 30.0, 3: 12.0}, {3: 12.0, 1: 5.0, 2: 10.0}) == [2.0, 3.0, 1.0]
    # missing in one of them, not a number, or a peer's zero: that repeat has no ratio
    assert paired_ratios({1: 10.0, 2: NAN, 3: 8.0, 4: 1.0}, {1: 5.0, 2: 1.0, 3: 0.0, 5: 1.0}) == [2.0]
    assert paired_ratios({}, {1: 1.0}) == []


def test_the_ratio_shows_its_median_and_its_spread() -> None:
    assert ratio_summary([0.96, 0.91, 1.02]) == "0.96x, 0.91-1.02x"
    assert ratio_summary([1.0, 1.0, 1.0]) == "1.00x", "the peer against itself: no spread"
    assert ratio_summary([1.3]) == "1.30x"
    assert ratio_summary([NAN]) == ""
    assert ratio_summary([]) == ""
    assert spread([22.8, 21.04, 24.1], 1, " ms") == "21.0-24.1 ms"
    assert spread([1.004, 0.996]) == "", "equal at the digits shown"
    assert median_range([22.8, 21.0, 24.1], 1, " ms") == "22.8 ms (21.0-24.1 ms)"
    assert median_range([12.94], 1, " KB") == "12.9 KB"
    assert median_range([NAN]) == "n/a"


def test_exactly_once_only_when_every_repeat_was() -> None:
    assert once_text([(1, None), (2, None), (3, None)]) == "yes, 3 of 3"
    assert once_text([(1, None), (3, "0/5,000 complete, 5,000 behind"), (2, None)]) == (
        "**no** in 1 of 3: repeat 3: 0/5,000 complete, 5,000 behind")
    assert once_text([(2, "b"), (1, "a")]) == "**no** in 2 of 2: repeat 1: a; repeat 2: b"


def test_an_aim_is_met_only_when_every_repeat_meets_it() -> None:
    assert verdict([True, True, True]) == "**met** in 3 of 3 repeats"
    assert verdict([True, False, True]) == "**not met** in 1 of 3 repeats (met in 2)"
    assert verdict([False]) == "**not met** in 1 of 1 repeats (met in 0)"
    assert verdict([]) == "not measured"


def seen(clients: int, p99_ms: float, lost: int = 0) -> Outcome:
    per = 50
    return Outcome(clients=clients, received=clients * per - lost, expected=clients * per,
                   complete=clients - (1 if lost else 0), lost=lost, frames=clients * per,
                   hist=[(p99_ms / 2, 98), (p99_ms, 2)], close_codes={1006: clients})


def phase(server: str, clients: int, rate: int, repeat: int, cpu: float, p99_ms: float, lost: int = 0) -> Phase:
    return Phase(server=server, clients=clients, rate=rate, per_commit=1, published=50, publish_seconds=5.0,
                 wall=5.0, server_cpu=cpu, redis_cpu=0.05, seen=seen(clients, p99_ms, lost), repeat=repeat,
                 server_kernel_cpu=cpu * 0.6)


def idle(server: str, clients: int, repeat: int, connect: float, kb: float) -> Idle:
    return Idle(server=server, clients=clients, connected=clients, failed=0, connect_seconds=connect,
                connect_p50=0.02, connect_p99=0.05, before={"VmRSS": 50_000},
                after={"VmRSS": 50_000 + round(kb * clients / 1.024)}, repeat=repeat)


def kill(server: str, repeat: int, caught: float) -> Kill:
    return Kill(server=server, clients=1000, rate=100, published=1000, caught_up_s=caught, back_s=caught - 0.1,
                recovered_clients=1000, not_caught_up=0, seen=seen(1000, 10.0), repeat=repeat)


def three_repeats(gateway_cpu: list[float]) -> tuple[list[Phase], list[Idle], list[Kill]]:
    """Three repeats at 1,000 clients, 10/s, the gateway's CPU per repeat given, the peer's 1.0 s."""
    phases = [p for r in (1, 2, 3) for p in (phase("sparkwire", 1000, 10, r, gateway_cpu[r - 1], 10.0),
                                             phase("centrifuge", 1000, 10, r, 1.0, 12.0),
                                             phase("naive", 1000, 10, r, 0.8, 9.0, lost=5 if r == 2 else 0))]
    idles = [m for r in (1, 2, 3) for m in (idle("sparkwire", 1000, r, 0.4, 12.0),
                                            idle("centrifuge", 1000, r, 0.1 * r, 36.0))]
    kills = [k for r in (1, 2, 3) for k in (kill("sparkwire", r, 0.6), kill("centrifuge", r, 0.5 + 0.1 * r))]
    return phases, idles, kills


def lines_of(phases: list[Phase], idles: list[Idle], kills: list[Kill]) -> dict[str, str]:
    return {line.split(":", 1)[0]: line for line in _sbs_aims.aims_lines(phases, idles, kills)[2:]}


def test_the_aims_over_repeats() -> None:
    phases, idles, kills = three_repeats([0.9, 0.95, 1.1])  # per CPU s x peer: 1.11, 1.05, 0.91
    aims = lines_of(phases, idles, kills)
    cpu = next(line for key, line in aims.items() if "delivered messages per CPU second" in key)
    assert ("**not met** in 1 of 3 repeats (met in 2); 1,000 clients: 1.05x, 0.91-1.11x at 1.0 vs 1.0 msgs/frame"
            " (met in 2 of 3). A server that falls behind") in cpu
    assert "compare like with like" in cpu
    memory = next(line for key, line in aims.items() if "KB per idle connection" in key)
    assert memory.endswith("**met** in 3 of 3 repeats; 12.0 KB at 1,000 clients.")
    assert "- p99 ≤ 20 ms at 1,000 clients on one pod: **met** in 3 of 3 repeats; 10/s: p99 10.0 ms." in aims.values()
    kill_aim = next(line for key, line in aims.items() if "SIGKILL" in key)
    # 0.6 s against 0.6, 0.7, 0.8: met in every repeat (at or below the peer's)
    assert "**met** in 3 of 3 repeats; 1,000 clients: 0.86x, 0.75-1.00x." in kill_aim
    connect = next(line for key, line in aims.items() if key.startswith("- Connect all"))
    # 0.4 s against 0.1, 0.2, 0.3: 4x, 2x, 1.33x
    assert "**not met** in 1 of 3 repeats (met in 2); 1,000 clients: 2.00x, 1.33-4.00x (met in 2 of 3)" in connect
    large = next(line for key, line in aims.items() if key.startswith("- 10,000 connections"))
    assert "not measured" in large, "no 10,000-client rows"
    p99_peer = next(line for key, line in aims.items() if "at or below the centrifuge peer's" in key)
    assert "not measured" in p99_peer, "no 5,000- or 10,000-client rows"

    phases, idles, kills = three_repeats([0.9, 0.95, 0.99])
    cpu = next(line for key, line in lines_of(phases, idles, kills).items() if "per CPU second" in key)
    assert ": **met** in 3 of 3 repeats; 1,000 clients: 1.05x, 1.01-1.11x at 1.0 vs 1.0 msgs/frame." in cpu


def test_the_tables_show_medians_and_the_spread_against_the_peer() -> None:
    phases, idles, kills = three_repeats([0.9, 0.95, 1.1])
    delivery = "\n".join(_sbs_report.delivery_table(phases))
    # delivered per CPU s: the median of 55,556 / 52,632 / 45,455, and of the ratios 1.11 / 1.05 / 0.91
    # server CPU s: the median and, in brackets, the kernel's part of it
    assert ("| 1,000 | 10 | sparkwire gateway | 3 | 10,000 | 1.0 | 0.95 (0.57) | 52,632 (1.05x, 0.91-1.11x) |"
            in delivery)
    assert "| 1,000 | 10 | centrifuge peer | 3 | 10,000 | 1.0 | 1.00 (0.60) | 50,000 (1.00x) |" in delivery
    assert "| yes, 3 of 3 |" in delivery
    assert "**no** in 1 of 3: repeat 2: 999/1,000 complete, 5 lost |" in delivery
    memory = "\n".join(_sbs_report.memory_table(idles))
    assert "| 0.40 (2.00x, 1.33-4.00x) |" in memory and "| 0.20 (1.00x) |" in memory
    table = "\n".join(_sbs_report.kill_table(kills))
    assert "| sparkwire gateway | 1,000 | 100 | 3 | 0.500 (0.83x, 0.71-1.00x) | 0.60 (0.86x, 0.75-1.00x) |" in table


def test_an_aim_judged_in_a_repeat_without_a_peer_is_not_judged() -> None:
    rows = [phase("sparkwire", 1000, 10, r, 0.5, 10.0) for r in (1, 2)]
    peers = [phase("centrifuge", 1000, 10, 1, 1.0, 10.0)]
    aim = _sbs_aims.ratio_aim("x", rows, peers, lambda p: p.per_cpu, lambda r: r >= 1.0)
    assert aim.oks == [True], "repeat 2 had no peer row"
    assert per_repeat(rows, lambda p: p.repeat == 1) == [True, False]


def test_ten_thousand_connections_are_judged_at_every_rate_and_at_one_message_per_frame_alone() -> None:
    phases = [p for r in (1, 2, 3) for p in (phase("sparkwire", 10_000, 10, r, 5.0, 150.0 + 20 * r),
                                             phase("sparkwire", 10_000, 500, r, 9.0, 5000.0))]
    aims = lines_of(phases, [], [])
    every_rate = next(line for key, line in aims.items() if "(every rate" in key)
    assert "**not met** in 3 of 3 repeats (met in 0); 10/s: p99 190.0 ms (170.0-210.0 ms) (met in 2 of 3)" in every_rate
    one_per_frame = next(line for key, line in aims.items() if "at one message per frame (10/s) with p99" in key)
    assert ": **not met** in 1 of 3 repeats (met in 2); 10/s: p99 190.0 ms (170.0-210.0 ms) (met in 2 of 3)." in (
        one_per_frame)
    phases = [phase("sparkwire", 10_000, 10, r, 5.0, 150.0 + 10 * r) for r in (1, 2, 3)]
    one_per_frame = next(line for key, line in lines_of(phases, [], []).items()
                         if "one message per frame (10/s)" in key)
    assert one_per_frame.endswith("**met** in 3 of 3 repeats; 10/s: p99 170.0 ms (160.0-180.0 ms).")
