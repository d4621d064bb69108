from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkwire.protocol.filter_form import Filter, FilterError, parse_filter
from sparkwire.protocol.filter_match import required_equality
from sparkwire.protocol.items import Entry
from sparkwire.protocol.scope import View
from sparkwire.protocol.view_feed import compile_view, view_items
from sparkwire.protocol.view_index import items_by_view

from .filter_strategies import filter_documents, keys, results


def entry(seq: int, key: str, data: object) -> Entry:
    return Entry(seq=seq, processing_id=f"p{seq}", key=key, data=json.dumps(data), commit_ms=1, batch_id=1)


def parsed(document: dict[str, object]) -> Filter | None:
    try:
        return parse_filter(document)
    except FilterError:
        return None


@settings(max_examples=300)
@given(st.lists(st.tuples(filter_documents(), filter_documents()), min_size=1, max_size=8),
       st.lists(st.tuples(keys(), results()), max_size=25))
def test_every_view_gets_what_it_would_alone(documents: list[tuple[dict[str, object], dict[str, object]]],
                                             log: list[tuple[str, object]]) -> None:
    """Views with and without equalities, over equalities on fields and on ``$key``, numbers and strings
    and booleans of one value (1, 1.0 and True), data missing fields or not an object: one pass gives each
    view exactly its own items, in seq order, and entries are parsed once."""
    views = [compile_view(View(parsed(scope), parsed(own)), removals=False) for scope, own in documents]
    run = [entry(seq, key, data) for seq, (key, data) in enumerate(log, 1)]
    parses: list[int] = []

    def data_of(e: Entry) -> object:
        parses.append(e.seq)
        return json.loads(e.data)

    found = items_by_view(views, run, data_of)
    assert sorted(parses) == [e.seq for e in run]  # each entry parsed once, however many views
    assert set(found) == {id(view) for view in views}
    for view in views:
        assert found[id(view)][0] is view
        assert found[id(view)][1] == view_items(view, run, lambda e: json.loads(e.data))


def test_the_equality_is_the_smallest_one_of_set_and_absent_without_one() -> None:
    assert required_equality(parse_filter({"tenant": "t1", "region": {"in": ["eu", "us"]}})) == (
        "tenant", frozenset({("s", "t1")}))
    assert required_equality(parse_filter({"$key": {"in": ["k1", "k2"]}, "n": {"gt": 3}})) == (
        "$key", frozenset({("s", "k1"), ("s", "k2")}))
    assert required_equality(parse_filter({"n": {"gt": 3}, "gone": {"isNull": True}})) is None
    assert required_equality(None) is None
    view = compile_view(View(parse_filter({"tenant": "t1"}), parse_filter({"n": 2})), removals=False)
    assert view.equality == ("n", frozenset({("n", 2)}))  # the client's own filter first


def test_a_thousand_tenant_views_ask_one_matcher_per_entry() -> None:
    """The point of the index: 1,000 tenants' views over 1,000 entries ask ~1,000 matchers, not a million."""
    asked = 0
    views = []
    for tenant in range(1000):
        compiled = compile_view(View(None, parse_filter({"tenant": f"t{tenant}"})), removals=False)

        def counting(key: str, data: object, inner=compiled.own) -> bool:  # type: ignore[no-untyped-def]
            nonlocal asked
            asked += 1
            return bool(inner(key, data))

        views.append(type(compiled)(compiled.in_scope, counting, False, compiled.equality))
    run = [entry(seq, "k", {"tenant": f"t{seq % 1000}"}) for seq in range(1, 1001)]
    found = items_by_view(views, run, lambda e: json.loads(e.data))
    assert asked == 1000
    assert [[item.entry.seq for item in found[id(view)][1]] for view in views[:3]] == [[1000], [1], [2]]


def test_update_mode_views_are_refused() -> None:
    with pytest.raises(ValueError, match="update-mode"):
        items_by_view([compile_view(View(None, parse_filter({"a": 1})), removals=True)], [], json.loads)
