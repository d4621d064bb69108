"""The harness's own reading of the filter form (the oracle of filtered chaos clients), what an update-mode
view's client must see, and the scoped tokens the run mints."""

from __future__ import annotations

import jwt
import pytest

from sparkwire_harness.chaos.views import (
    METRIC_PROFILES,
    ORDER_PROFILES,
    Profile,
    admits,
    admits_view,
    token,
    update_oracle,
)

SECRET = "s" * 48


def test_an_absent_field_and_a_null_one_are_one_and_only_isnull_admits_them() -> None:
    absent: tuple[object, ...] = ({}, {"tenant": None}, [], "not an object", 3)
    for data in absent:
        assert admits({"tenant": {"isNull": True}}, "k", data)
        assert not admits({"tenant": {"isNull": False}}, "k", data)
        assert not admits({"tenant": "acme"}, "k", data)
        assert not admits({"tenant": {"in": ["acme"]}}, "k", data)
        assert not admits({"tenant": {"lt": 5}}, "k", data) and not admits({"tenant": {"ge": 5}}, "k", data)
    assert admits({"tenant": {"isNull": False}}, "k", {"tenant": 0})
    assert not admits({"tenant": {"isNull": True}}, "k", {"tenant": False})


def test_equality_is_by_json_kind_and_value() -> None:
    assert admits({"n": 2}, "k", {"n": 2.0}) and admits({"n": {"eq": 2.0}}, "k", {"n": 2})
    assert not admits({"n": 1}, "k", {"n": True}) and not admits({"n": True}, "k", {"n": 1})
    assert not admits({"n": 2}, "k", {"n": "2"}) and not admits({"n": "2"}, "k", {"n": 2})
    assert admits({"s": "19.90"}, "k", {"s": "19.90"}) and not admits({"s": "19.90"}, "k", {"s": "19.9"})
    assert not admits({"s": "EU"}, "k", {"s": "eu"})
    assert admits({"n": {"in": ["x", 3, False]}}, "k", {"n": 3.0}) and admits({"n": {"in": [False]}}, "k", {"n": False})
    assert not admits({"n": {"in": [0]}}, "k", {"n": False})


def test_comparisons_hold_for_numbers_only_and_operators_are_anded() -> None:
    window = {"count": {"ge": 10, "lt": 100}}
    assert admits(window, "k", {"count": 10}) and admits(window, "k", {"count": 99.5})
    assert not admits(window, "k", {"count": 100}) and not admits(window, "k", {"count": 9})
    for value in ("50", True, [50], {"v": 50}, float("nan")):
        assert not admits({"count": {"gt": 0}}, "k", {"count": value}), value
    assert admits({"count": {"gt": 0}, "region": "eu"}, "k", {"count": 1, "region": "eu"})
    assert not admits({"count": {"gt": 0}, "region": "eu"}, "k", {"count": 1, "region": "us"})


def test_key_conditions_read_the_entrys_key_not_a_field() -> None:
    assert admits({"$key": {"in": ["a", "b"]}}, "a", {"$key": "z"})
    assert not admits({"$key": "a"}, "b", {"metricName": "a"})


def test_an_empty_or_no_filter_admits_everything_and_the_view_is_scope_and_filter() -> None:
    assert admits(None, "k", None) and admits({}, "k", [])
    profile = Profile("p", filter={"count": {"ge": 5}}, scope={"$key": "a"})
    assert admits_view(profile, "a", {"count": 5})
    assert not admits_view(profile, "b", {"count": 5}) and not admits_view(profile, "a", {"count": 4})


def test_an_unknown_operator_is_a_mistake_in_the_harness_not_a_silent_false() -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        admits({"n": {"like": "x%"}}, "k", {"n": "x"})


def row(seq: int, key: str, orders: int, tenant: str = "acme") -> tuple[int, str, str, object]:
    return seq, f"p{seq}", key, {"region": key, "orders": orders, "tenant": tenant}


def test_update_mode_a_held_key_moving_out_is_removed_once_and_a_move_in_is_an_entry() -> None:
    profile = Profile("busy", filter={"orders": {"ge": 3}})
    rows = [row(1, "eu", 1), row(2, "eu", 3), row(3, "us", 5), row(4, "eu", 1), row(5, "eu", 2), row(6, "eu", 4),
            row(7, "us", 1)]
    oracle = update_oracle(profile, reversed(rows))  # in seq order whatever the order given
    assert oracle.entries == [(2, "p2"), (3, "p3"), (6, "p6")]
    # seq 1: never held, nothing to remove; seq 5: removed already at 4
    assert oracle.removals == [(4, "eu"), (7, "us")]
    assert oracle.state == {"eu": (6, "p6")}


def test_update_mode_revisions_outside_the_scope_are_never_mentioned() -> None:
    profile = Profile("scoped", scope={"tenant": "acme"}, filter={"orders": {"ge": 3}})
    rows = [row(1, "eu", 4), row(2, "eu", 1, tenant="globex"), row(3, "us", 9, tenant="globex"), row(4, "eu", 5)]
    oracle = update_oracle(profile, rows)
    # seq 2 left the scope: no removal; the key stays as its last revision within the scope until seq 4
    assert oracle.entries == [(1, "p1"), (4, "p4")] and oracle.removals == []
    assert oracle.state == {"eu": (4, "p4")}


def test_the_runs_tokens_carry_the_profiles_scope_for_the_stream_only_when_it_has_one() -> None:
    scoped = next(p for p in METRIC_PROFILES if p.scope is not None and p.filter is None)
    claims = jwt.decode(token(SECRET, "metrics", scoped, 600, subject="client-4"), SECRET, algorithms=["HS256"])
    assert claims["streams"] == ["metrics"] and claims["sub"] == "client-4"
    assert claims["scope"] == {"metrics": dict(scoped.scope or {})}
    plain = jwt.decode(token(SECRET, "metrics", Profile(""), 600, subject="c"), SECRET, algorithms=["HS256"])
    assert "scope" not in plain


def test_the_profiles_use_every_kind_of_condition_and_scopes_on_both_streams() -> None:
    documents = [d for p in METRIC_PROFILES for d in (p.filter, p.scope) if d]
    operators = {op for d in documents for c in d.values() for op in (c if isinstance(c, dict) else {"eq": c})}
    assert {"eq", "in", "lt", "gt", "ge", "isNull"} <= operators
    assert any("$key" in d for d in documents)
    assert any(p.scope and not p.filter for p in METRIC_PROFILES) and any(p.scope and p.filter for p in METRIC_PROFILES)
    assert any(p.scope for p in ORDER_PROFILES) and any(p.filter for p in ORDER_PROFILES)
    assert len({p.name for p in METRIC_PROFILES}) == len(METRIC_PROFILES)
