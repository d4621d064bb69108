"""Hypothesis strategies for filters and results, and a naive evaluator written from docs/protocol.md
("The filter form") without the module's normal form: the reference the compiled matcher is checked against."""

from __future__ import annotations

import operator
from collections.abc import Callable

from hypothesis import strategies as st

NAMES = ("a", "b", "c")
STRINGS = ("x", "y", "z")
NUMBERS = (-2, -1, 0, 1, 2, 0.5, 1.0, 2.5)
SCALARS = st.sampled_from((*STRINGS, *NUMBERS, True, False))
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}


def _operators(key: bool) -> st.SearchStrategy[object]:
    if key:
        strings = st.sampled_from(("k0", "k1", "k2", "k3"))
        return st.one_of(strings, st.fixed_dictionaries({}, optional={
            "eq": strings, "in": st.lists(strings, min_size=1, max_size=3)}).filter(bool))
    number = st.sampled_from(NUMBERS)
    return st.one_of(SCALARS, st.fixed_dictionaries({}, optional={
        "eq": SCALARS, "in": st.lists(SCALARS, min_size=1, max_size=4), "lt": number, "le": number, "gt": number,
        "ge": number, "isNull": st.booleans()}).filter(bool))


def filter_documents() -> st.SearchStrategy[dict[str, object]]:
    """Filters in the wire form; some admit nothing on a field (parse_filter refuses those)."""
    return st.dictionaries(st.sampled_from((*NAMES, "$key")), st.just(None), max_size=3).flatmap(
        lambda names: st.fixed_dictionaries({name: _operators(name == "$key") for name in names}))


# Mostly few values, so that filters match some rows and not others; every kind now and then.
VALUES = st.one_of(st.sampled_from(("absent", None, "x", "y", 0, 1, 2.5, True)), st.sampled_from(("absent", "x", 0)),
                   SCALARS, st.just([1]), st.just({"x": 1}))


def results() -> st.SearchStrategy[object]:
    """Result data: fields missing, null, of every kind; now and then not an object at all."""
    objects = st.fixed_dictionaries({name: VALUES for name in NAMES}).map(
        lambda d: {k: v for k, v in d.items() if v != "absent"})
    return st.one_of(objects, objects, objects, st.just([1, 2]), st.just("text"))


def keys() -> st.SearchStrategy[str]:
    return st.sampled_from(("k0", "k0", "k0", "k0", "k1", "k1", "k2", "k3"))  # skewed: one hot key


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _same(value: object, operand: object) -> bool:
    return value is not None and _kind(value) == _kind(operand) and value == operand


def naive_matches(document: dict[str, object], key: str, data: object) -> bool:
    fields = data if isinstance(data, dict) else {}
    for name, condition in document.items():
        value = key if name == "$key" else fields.get(name)
        for op, operand in (condition if isinstance(condition, dict) else {"eq": condition}).items():
            if op == "isNull":
                ok = (value is None) == operand
            elif op == "eq":
                ok = _same(value, operand)
            elif op == "in":
                ok = isinstance(operand, list) and any(_same(value, o) for o in operand)
            else:
                ok = _kind(value) == "number" and _COMPARE[op](value, operand)  # type: ignore[arg-type]
            if not ok:
                return False
    return True


_USEFUL: tuple[dict[str, object], ...] = (
    {"a": "x"}, {"a": {"in": ["x", "y"]}}, {"a": {"ge": 0}}, {"a": {"isNull": True}}, {"a": {"isNull": False}},
    {"b": {"lt": 1}}, {"b": {"in": [0, 1, True]}}, {"$key": {"in": ["k0", "k1"]}}, {"$key": "k0"},
)


def useful_filters() -> st.SearchStrategy[dict[str, object]]:
    """Filters that match a fair share of ``results()`` (random ones mostly match nothing), one or two
    conditions; mixed with random ones for breadth."""
    pairs = st.tuples(st.sampled_from(_USEFUL), st.sampled_from(_USEFUL)).map(lambda p: {**p[0], **p[1]})
    return st.one_of(st.sampled_from(_USEFUL), st.sampled_from(_USEFUL), pairs, filter_documents())


def scopes() -> st.SearchStrategy[dict[str, object] | None]:
    curated = st.sampled_from(({"c": {"in": ["x", "y", 0]}}, {"$key": {"in": ["k0", "k2"]}}, {"c": {"isNull": False}}))
    return st.one_of(st.none(), curated, curated, filter_documents())
