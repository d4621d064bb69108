from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkwire.protocol.filter_form import FilterError, canonical_json, parse_filter, parse_filter_json
from sparkwire.protocol.filter_match import compile_filter

from .filter_strategies import filter_documents, keys, naive_matches, results


def matches(document: dict[str, object], data: object, key: str = "k") -> bool:
    return compile_filter(parse_filter(document))(key, data)


@pytest.mark.parametrize(("data", "is_null", "not_null", "eq_0", "lt_5", "ge_5"), [
    ({}, True, False, False, False, False),  # missing
    ({"a": None}, True, False, False, False, False),  # JSON null: the same as missing
    ({"a": 0}, False, True, True, True, False),
    ({"a": 7.5}, False, True, False, False, True),
    ({"a": "3"}, False, True, False, False, False),  # a decimal as a string never compares
    ({"a": "NaN"}, False, True, False, False, False),
    ({"a": False}, False, True, False, False, False),  # false is not 0
    ({"a": [0]}, False, True, False, False, False),
    ("not an object", True, False, False, False, False),
])
def test_null_and_kind_semantics(data: object, is_null: bool, not_null: bool, eq_0: bool, lt_5: bool,
                                 ge_5: bool) -> None:
    assert matches({"a": {"isNull": True}}, data) is is_null
    assert matches({"a": {"isNull": False}}, data) is not_null
    assert matches({"a": 0}, data) is eq_0
    assert matches({"a": {"lt": 5}}, data) is lt_5
    assert matches({"a": {"ge": 5}}, data) is ge_5


def test_numbers_match_by_value_and_strings_exactly() -> None:
    assert matches({"a": 2}, {"a": 2.0}) and matches({"a": 2.0}, {"a": 2})
    assert matches({"a": {"in": ["eu", 1]}}, {"a": "eu"})
    assert not matches({"a": "eu"}, {"a": "EU"})
    assert not matches({"a": True}, {"a": 1}) and not matches({"a": 1}, {"a": True})
    assert matches({"a": {"gt": 1, "le": 2}}, {"a": 2}) and not matches({"a": {"gt": 1, "le": 2}}, {"a": 1})


def test_key_and_fields_are_anded_and_the_empty_filter_matches_everything() -> None:
    f: dict[str, object] = {"$key": {"in": ["k1", "k2"]}, "region": "eu"}
    assert matches(f, {"region": "eu"}, key="k1")
    assert not matches(f, {"region": "eu"}, key="k3")
    assert not matches(f, {"region": "us"}, key="k1")
    assert matches({}, None) and matches({}, {"a": 1})


@given(filter_documents(), st.lists(st.tuples(keys(), results()), max_size=30))
def test_the_compiled_matcher_filters_a_log_as_the_naive_reading_of_the_spec(
    document: dict[str, object], log: list[tuple[str, object]]
) -> None:
    try:
        f = parse_filter(document)
    except FilterError:
        # Refused only when some field admits nothing: then no entry matches it anyway.
        assert not any(naive_matches(document, key, data) for key, data in log)
        return
    matcher = compile_filter(f)
    expected = [i for i, (key, data) in enumerate(log) if naive_matches(document, key, data)]
    assert [i for i, (key, data) in enumerate(log) if matcher(key, data)] == expected
    # The canonical form is the same filter, read naively too.
    canonical = compile_filter(parse_filter_json(canonical_json(f)))
    assert [i for i, (key, data) in enumerate(log) if canonical(key, data)] == expected
