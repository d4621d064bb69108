from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkwire.protocol.filter_form import (
    FieldTest,
    Filter,
    FilterError,
    canonical_json,
    filter_id,
    parse_filter,
    parse_filter_json,
)
from sparkwire.protocol.limits import MAX_FILTER_FIELDS, MAX_FILTER_JSON_BYTES, MAX_FILTER_VALUES

from .filter_strategies import filter_documents


def refused(document: object) -> str:
    with pytest.raises(FilterError) as caught:
        parse_filter(document)
    return caught.value.reason


def test_a_filter_parses_to_one_test_per_field_sorted_by_name() -> None:
    f = parse_filter({"region": "eu", "count": {"ge": 10, "lt": 100}, "closedAt": {"isNull": True},
                      "$key": {"in": ["k2", "k1"]}})
    assert [name for name, _ in f.fields] == ["$key", "closedAt", "count", "region"]
    assert f.field("region") == FieldTest(one_of=frozenset({("s", "eu")}))
    assert f.field("count") == FieldTest(lower=(10, True), upper=(100, False))
    assert f.field("closedAt") == FieldTest(null=True)
    assert f.field("$key") == FieldTest(one_of=frozenset({("s", "k1"), ("s", "k2")}))
    assert parse_filter({}) == Filter()


def test_a_number_and_a_boolean_stay_apart_though_python_equates_1_and_true() -> None:
    assert parse_filter({"a": {"in": [1, True]}}).field("a") == FieldTest(one_of=frozenset({("n", 1), ("b", True)}))


@pytest.mark.parametrize(("document", "reason"), [
    ([], "filter must be an object"),
    ({"a": None}, "filter.a is null: use"),
    ({"a": [1, 2]}, "filter.a is a list: use"),
    ({"a": {}}, "filter.a has no operator"),
    ({"a": {"ne": 1}}, "unknown operators ['ne']"),
    ({"a": {"in": []}}, "filter.a.in must be a non-empty list"),
    ({"a": {"in": "x"}}, "filter.a.in must be a non-empty list"),
    ({"a": {"in": [None]}}, "filter.a.in is null"),
    ({"a": {"gt": "5"}}, "filter.a.gt must be a number, got str"),
    ({"a": {"gt": True}}, "filter.a.gt must be a number, got bool"),
    ({"a": {"lt": float("inf")}}, "finite number"),
    ({"a": {"lt": 1 << 64}}, "finite number"),
    ({"a": {"isNull": 1}}, "filter.a.isNull must be true or false"),
    ({"a": {"eq": {"x": 1}}}, "filter.a.eq must be a string, number or boolean"),
    ({"a": "x" * 257}, "longer than 256"),
    ({"": 1}, "field names must be"),
    ({"$seq": 1}, "reserved"),
    ({"$key": 1}, "filter.$key must be a string"),
    ({"$key": {"isNull": True}}, "supports only eq and in"),
    ({"a": {"isNull": True, "eq": 1}}, "matches nothing"),
    ({"a": {"gt": 5, "lt": 3}}, "matches nothing"),
    ({"a": {"gt": 5, "le": 5}}, "matches nothing"),
    ({"a": {"eq": "x", "in": ["y"]}}, "matches nothing"),
    ({"a": {"in": ["x", 7], "gt": 7}}, "matches nothing"),
])
def test_what_is_refused_is_named(document: object, reason: str) -> None:
    assert reason in refused(document)


def test_size_and_complexity_are_bounded() -> None:
    assert "more than 16 fields" in refused({f"f{i}": 1 for i in range(MAX_FILTER_FIELDS + 1)})
    parse_filter({f"f{i}": 1 for i in range(MAX_FILTER_FIELDS)})
    assert f"more than {MAX_FILTER_VALUES} values" in refused(
        {"a": {"in": list(range(200))}, "b": {"in": list(range(57))}})
    parse_filter({"a": {"in": list(range(MAX_FILTER_VALUES))}})


def test_json_text_is_parsed_strictly_and_bounded() -> None:
    assert parse_filter_json('{"a": 1}') == parse_filter({"a": 1})
    for text, reason in [('{"a": 1, "a": 2}', "appears twice"), ('{"a": NaN}', "not JSON"), ("{", "not JSON"),
                         ('{"a": "' + "x" * MAX_FILTER_JSON_BYTES + '"}', "larger than 4096 bytes")]:
        with pytest.raises(FilterError, match=reason):
            parse_filter_json(text)


def test_normal_form_folds_what_admits_the_same_values() -> None:
    same = [{"a": 2}, {"a": 2.0}, {"a": {"eq": 2}}, {"a": {"in": [2, 2.0]}}, {"a": {"ge": 2, "le": 2}},
            {"a": {"in": [2, 3, "x"], "lt": 3}}, {"a": {"eq": 2, "isNull": False}}]
    assert len({parse_filter(d) for d in same}) == 1
    assert len({filter_id(parse_filter(d)) for d in same}) == 1
    assert canonical_json(parse_filter(same[0])) == '{"a":{"eq":2}}'
    assert parse_filter({"a": {"gt": 1, "ge": 1}}) == parse_filter({"a": {"gt": 1}})
    assert parse_filter({"a": {"lt": 3, "le": 2}}) == parse_filter({"a": {"le": 2}})
    assert canonical_json(parse_filter({"b": {"in": ["y", 1, False]}, "a": {"isNull": False}})) == (
        '{"a":{"isNull":false},"b":{"in":[false,1,"y"]}}')


@given(filter_documents())
def test_the_canonical_form_parses_back_to_the_same_filter(document: dict[str, object]) -> None:
    try:
        f = parse_filter(document)
    except FilterError as error:
        assert "matches nothing" in error.reason
        return
    text = canonical_json(f)
    assert parse_filter_json(text) == f
    assert canonical_json(parse_filter(json.loads(text))) == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=12))
def test_anything_parses_or_is_refused_with_a_filter_error(document: object) -> None:
    # No other exception escapes (hypothesis fails the test on one); what parses has its one canonical form.
    try:
        parsed = parse_filter(document)
    except FilterError as error:
        assert str(error), "a refusal names what is wrong"
        return
    assert parse_filter_json(canonical_json(parsed)) == parsed
