from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkwire.protocol.filter_form import FieldTest, Filter, FilterError, parse_filter
from sparkwire.protocol.filter_match import compile_filter, compile_test
from sparkwire.protocol.scope import (
    ScopeViolation,
    View,
    admits_only,
    effective_filter,
    make_view,
    parse_scope_claim,
    position_fits,
    scope_for,
)

from .filter_strategies import SCALARS

ACME = parse_filter({"tenant": "acme"})


def view(own: dict[str, object] | None, scope: Filter | None = ACME) -> View | None:
    return make_view(scope, None if own is None else parse_filter(own))


@pytest.mark.parametrize("own", [None, {}, {"region": "eu"}, {"tenant": "acme"}, {"tenant": "acme", "n": {"gt": 1}}])
def test_a_filter_within_the_scope_narrows_it(own: dict[str, object] | None) -> None:
    v = view(own)
    assert v is not None
    assert compile_filter(v.effective)("k", {"tenant": "acme", "region": "eu", "n": 2})
    assert not compile_filter(v.effective)("k", {"tenant": "globex", "region": "eu", "n": 2})


@pytest.mark.parametrize("own", [{"tenant": "globex"}, {"tenant": {"in": ["acme", "globex"]}},
                                 {"tenant": {"isNull": False}}, {"tenant": {"isNull": True}}])
def test_a_filter_that_names_rows_outside_the_scope_is_refused(own: dict[str, object]) -> None:
    with pytest.raises(ScopeViolation) as caught:
        view(own)
    assert caught.value.field == "tenant"
    assert "outside the token's scope" in caught.value.reason


def test_key_scopes_and_interval_scopes() -> None:
    keys = parse_filter({"$key": {"in": ["k1", "k2"]}})
    assert view({"$key": "k1"}, keys) is not None
    with pytest.raises(ScopeViolation):
        view({"$key": {"in": ["k1", "k3"]}}, keys)
    band = parse_filter({"n": {"ge": 0, "lt": 10}})
    assert view({"n": {"gt": 0, "le": 5}}, band) is not None
    assert view({"n": {"in": [0, 9.5]}}, band) is not None
    outside: list[dict[str, object]] = [{"n": {"ge": 0}}, {"n": {"gt": -1, "lt": 5}}, {"n": {"in": [0, 10]}},
                                        {"n": "0"}]
    for own in outside:
        with pytest.raises(ScopeViolation):
            view(own, band)


def test_no_scope_and_no_filter_is_no_view_and_views_are_named_by_scope_and_filter_apart() -> None:
    assert make_view(None, None) is None
    assert make_view(None, Filter()) is not None
    unscoped = view({"tenant": "acme"}, None)
    scoped = view(None)
    assert unscoped is not None and scoped is not None
    # The same rows, but not the same view: only the client's own filter makes removals.
    assert unscoped.effective == scoped.effective
    assert unscoped.id != scoped.id
    empty, none = view({}), view(None)
    assert empty is not None and none is not None and empty.id == none.id
    assert effective_filter(None, None) is None


def test_the_scope_claim_is_a_filter_per_stream_with_a_default() -> None:
    scopes = parse_scope_claim({"orders": {"tenant": "acme"}, "*": {"tenant": "acme", "region": "eu"}})
    assert scope_for(scopes, "orders") == ACME
    assert scope_for(scopes, "metrics") == parse_filter({"tenant": "acme", "region": "eu"})
    assert scope_for(parse_scope_claim({"orders": {}}), "metrics") is None
    assert scope_for(None, "orders") is None
    for claim in (["orders"], {"orders": {"tenant": None}}, {"orders": 1}):
        with pytest.raises(FilterError):
            parse_scope_claim(claim)


def _conditions() -> st.SearchStrategy[FieldTest]:
    number = st.sampled_from((-2, -1, 0, 0.5, 1, 2))
    document = st.one_of(SCALARS, st.fixed_dictionaries({}, optional={
        "in": st.lists(SCALARS, min_size=1, max_size=3), "lt": number, "le": number, "gt": number, "ge": number,
        "isNull": st.booleans()}).filter(bool))

    def parsed(condition: object) -> FieldTest | None:
        try:
            return parse_filter({"f": condition}).field("f")
        except FilterError:
            return None

    return document.map(parsed).filter(lambda t: t is not None)  # type: ignore[return-value]


def _witnesses(*tests: FieldTest) -> list[object]:
    """Values that tell two tests apart if anything does: absent, every kind, every number either test
    names, the midpoints between them and beyond their ends."""
    numbers = {-2.0, 2.0}
    for t in tests:
        numbers |= {float(v) for kind, v in t.one_of or () if kind == "n"}
        numbers |= {float(b[0]) for b in (t.lower, t.upper) if b is not None}
    ordered = sorted(numbers)
    numbers |= {(a + b) / 2 for a, b in itertools.pairwise(ordered)} | {ordered[0] - 1, ordered[-1] + 1}
    strings = {v for t in tests for kind, v in t.one_of or () if kind == "s"} | {"other"}
    return [None, True, False, *numbers, *strings]


@given(_conditions(), _conditions())
def test_admits_only_is_exact(own: FieldTest, scope: FieldTest) -> None:
    own_admits, scope_admits = compile_test(own), compile_test(scope)
    escapes = [v for v in _witnesses(own, scope) if own_admits(v) and not scope_admits(v)]
    assert admits_only(own, scope) is (not escapes)


def test_a_position_resumes_only_in_the_view_it_was_covered_under() -> None:
    acme, narrower = view(None), view({"region": "eu"})
    assert acme is not None and narrower is not None
    assert position_fits(5, acme.id, acme)
    assert not position_fits(5, acme.id, narrower)  # another filter: entries of the new view were skipped
    assert not position_fits(5, None, acme)  # an unfiltered position in a filtered view
    assert not position_fits(5, acme.id, None)
    assert position_fits(5, None, None)
    assert position_fits(0, None, acme)  # nothing applied: any view
