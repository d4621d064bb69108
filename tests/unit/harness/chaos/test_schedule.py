"""The fault schedule is a pure function of the seed: the same seed prints the same schedule, and every
run mixes every kind of fault the chaos run promises."""

from __future__ import annotations

import dataclasses

import pytest

from sparkwire_harness.chaos import schedule as schedule_module
from sparkwire_harness.chaos.schedule import CATEGORIES, LINKS, PAUSE_S, TOXICS, build_schedule
from sparkwire_harness.chaos.views import BY_NAME, METRIC_PROFILES


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert build_schedule(7, 10).describe() == build_schedule(7, 10).describe()
    assert build_schedule(7, 10).describe() != build_schedule(8, 10).describe()


@pytest.mark.parametrize("seed", [1, 2, 3, 7, 11])
def test_the_default_run_has_every_fault_the_issue_asks_for(seed: int) -> None:
    schedule = build_schedule(seed, 10)
    counts = schedule.counts()
    assert counts["driver"] >= 5
    kinds = {fault.kind for fault in schedule.faults}
    assert {"driver-kill", "gateway-kill", "gateway-roll", "gateway-pause", "redis-failover", "kafka-leader",
            "consumer-freeze", "page-reload"} <= kinds
    assert not kinds & {"redis-kill", "kafka-restart"}  # the single topology's
    # a crash and a cut, of the Redis primary and of the Kafka leader, at least twice each
    for kind in ("redis-failover", "kafka-leader"):
        modes = [dict(f.params)["partition"] for f in schedule.faults if f.kind == kind]
        assert modes.count(0) >= 2 and modes.count(1) >= 2, (kind, modes)
    assert sum(1 for f in schedule.faults if f.kind == "gateway-pause") == 1
    # every toxic on every link class it makes sense on
    by_proxy = {proxy: link for link, proxies in LINKS.items() for proxy in proxies}
    seen = {(by_proxy[f.target], f.toxic) for f in schedule.faults if f.kind == "net"}
    assert seen == {(link, toxic) for link, toxics in TOXICS.items() for toxic in toxics}
    kinds_of_clients = {c.kind for c in schedule.clients}
    assert kinds_of_clients == {"steady", "slow", "cursor", "session"} and len(schedule.clients) == 200


def test_the_single_topology_kills_and_restarts_redis_and_kafka_in_place() -> None:
    schedule = build_schedule(7, 10, topology="single")
    kinds = {fault.kind for fault in schedule.faults}
    assert {"redis-kill", "kafka-restart"} <= kinds and not kinds & {"redis-failover", "kafka-leader"}
    # a Kafka crash as well as a clean restart
    assert {dict(f.params)["sigkill"] for f in schedule.faults if f.kind == "kafka-restart"} == {0, 1}
    assert set(schedule.counts()) == set(CATEGORIES["single"])
    with pytest.raises(ValueError, match="topology"):
        build_schedule(7, 10, topology="sharded")


@pytest.mark.parametrize("topology", ["replicated", "single"])
@pytest.mark.parametrize(("minutes", "seed"), [(2.5, 7), (1.5, 3), (10, 1), (30, 5)])
def test_every_fault_starts_and_heals_inside_the_window_and_short_runs_still_cover_every_category(
    minutes: float, seed: int, topology: str
) -> None:
    schedule = build_schedule(seed, minutes, clients=50, topology=topology)
    assert all(f.at_s > 0 and f.ends_s <= schedule.window_s for f in schedule.faults)
    assert sorted(f.at_s for f in schedule.faults) == [f.at_s for f in schedule.faults]
    assert [f.index for f in schedule.faults] == list(range(1, len(schedule.faults) + 1))
    assert all(schedule.counts()[category] >= 1 for category in CATEGORIES[topology])
    links = {link for link, proxies in LINKS.items() for f in schedule.faults if f.target in proxies}
    assert links == set(LINKS)
    for client in schedule.clients:
        for leave, back in client.absences:
            assert 0 <= leave < back <= schedule.window_s


def test_the_paused_gateway_stays_stopped_longer_than_the_clients_wait_for_a_frame() -> None:
    from sparkwire_harness.chaos.run import SILENCE_S

    pauses = [f for seed in range(20) for f in build_schedule(seed, 10).faults if f.kind == "gateway-pause"]
    assert PAUSE_S[0] > SILENCE_S + 2
    assert all(f.duration_s >= PAUSE_S[0] for f in pauses)


def test_the_printed_schedule_names_every_fault_and_every_absence() -> None:
    schedule = build_schedule(7, 10)
    text = schedule.describe()
    assert text.splitlines()[0].startswith("fault schedule, seed 7, replicated topology: ")
    assert all(fault.describe() in text for fault in schedule.faults)
    assert sum(1 for line in text.splitlines() if " away +" in line) == sum(1 for c in schedule.clients if c.absences)


def test_a_run_of_no_length_is_refused() -> None:
    with pytest.raises(ValueError, match="minutes"):
        build_schedule(1, 0)


@pytest.mark.parametrize("seed", [1, 7, 61843, 90210])
@pytest.mark.parametrize("minutes", [5, 10])
def test_every_run_fails_over_the_input_partitions_leader_at_least_twice_for_the_whole_drawn_time(
        seed: int, minutes: int) -> None:
    """Issue 38: a lagging partition truncated windows; each kafka-leader fault makes partition 0 lag (its
    backlog read after the failover), so every run has at least two, none cut short by the window's end."""
    schedule = build_schedule(seed, minutes)
    leader = [f for f in schedule.faults if f.kind == "kafka-leader"]
    assert len(leader) >= (4 if minutes == 10 else 2), schedule.describe()
    assert {dict(f.params)["partition"] for f in leader} == {0, 1}  # a crash and a cut
    for fault in leader:
        assert fault.duration_s >= 3.0 and fault.ends_s <= schedule.window_s - 2, fault.describe()


@pytest.mark.parametrize(("clients", "filtered"), [(50, 6), (200, 20), (6, 6), (3, 3)])
def test_one_client_in_ten_is_filtered_or_scoped_every_profile_at_least_once(clients: int, filtered: int) -> None:
    plans = build_schedule(90417, 3, clients).clients
    profiles = [c.profile for c in plans if c.profile]
    assert len(profiles) == filtered
    assert set(profiles) == {p.name for p in METRIC_PROFILES[:filtered]}
    assert set(profiles) <= set(BY_NAME)


@pytest.mark.parametrize("seed", [7, 90417, 3])
def test_filtered_and_scoped_clients_also_leave_and_come_back_with_a_cursor_and_with_a_session(seed: int) -> None:
    plans = build_schedule(seed, 2, 50).clients
    returning = {c.kind for c in plans if c.profile and c.absences}
    assert returning == {"cursor", "session"}
    scoped = [c for c in plans if c.profile and BY_NAME[c.profile].scope is not None]
    assert any(c.absences for c in scoped)


def test_profiles_draw_nothing_from_the_seed_so_faults_and_plans_stay_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with_profiles = build_schedule(11, 10)
    monkeypatch.setattr(schedule_module, "_with_profiles", lambda plans: plans)
    without = build_schedule(11, 10)
    assert with_profiles.faults == without.faults
    assert [dataclasses.replace(c, profile="") for c in with_profiles.clients] == without.clients
    assert "filtered and scoped clients: 20: " in with_profiles.describe()
