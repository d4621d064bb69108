"""A filter compiled into a matcher: the per-field tests built once, so that matching an entry for one
distinct filter is a few dict lookups and set tests, no parsing (a pod matches every entry of a stream
against each distinct filter its clients hold, once, and fans the verdict out)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sparkwire.protocol.filter_form import KEY_FIELD, FieldTest, Filter, Value, within

Matcher = Callable[[str, object], bool]
"""(entry key, parsed result data) -> whether the entry matches."""
_Test = Callable[[object], bool]
_NOTHING: Mapping[str, object] = {}


def _is_number(value: object) -> bool:
    # exact types: a JSON parser makes int, float, bool, str; bool is an int in Python but not a JSON number
    kind = type(value)
    return kind is int or kind is float


def _one_of(test: FieldTest) -> _Test:
    assert test.one_of is not None
    strings = frozenset(v for kind, v in test.one_of if kind == "s")
    numbers = frozenset(v for kind, v in test.one_of if kind == "n")
    booleans = frozenset(v for kind, v in test.one_of if kind == "b")

    def matches(value: object) -> bool:
        kind = type(value)
        if kind is str:
            return value in strings
        if kind is int or kind is float:
            return value in numbers  # 2 and 2.0 are one number, as in JSON
        if kind is bool:
            return value in booleans
        return False

    return matches


def compile_test(test: FieldTest) -> _Test:
    """One field's test on its value (``None`` for a missing field or a JSON null: both absent)."""
    if test.null is True:
        return lambda value: value is None
    if test.null is False:
        return lambda value: value is not None
    if test.one_of is not None:
        return _one_of(test)
    lower, upper = test.lower, test.upper
    # A comparison holds for JSON numbers only: a string (a decimal, a timestamp, "NaN"), a boolean or an
    # absent field never compares, whichever way.
    return lambda value: _is_number(value) and within(value, lower, upper)  # type: ignore[arg-type]


def compile_filter(f: Filter) -> Matcher:
    """The matcher of ``f``. Data that is not a JSON object has every field absent."""
    key_test: _Test | None = None
    tests: list[tuple[str, _Test]] = []
    for name, test in f.fields:
        if name == KEY_FIELD:
            key_test = compile_test(test)
        else:
            tests.append((name, compile_test(test)))
    fields = tuple(tests)
    if key_test is None and len(fields) == 1:  # the common case (one tenant, one region), kept lean
        [(only_name, only_test)] = fields
        return lambda key, data: only_test(data.get(only_name) if type(data) is dict else None)

    def matches(key: str, data: object) -> bool:
        if key_test is not None and not key_test(key):
            return False
        get = (data if type(data) is dict else _NOTHING).get
        for name, test in fields:  # noqa: SIM110 - a loop, not all(...): no generator per entry and filter
            if not test(get(name)):
                return False
        return True

    return matches


def required_equality(f: Filter | None) -> tuple[str, frozenset[Value]] | None:
    """A condition every entry ``f`` matches meets: (field, values) when ``f`` asks a field (or ``"$key"``) to
    be one of a set of values, the smallest such set; None when it asks none (only ranges, nulls, nothing).
    An entry whose value there, tagged (``filter_form.tag``), is not in the set cannot match ``f``: what lets a
    pod find the filters an entry may match by looking its value up (``view_index``)."""
    if f is None:
        return None
    equalities = [(len(test.one_of), name, test.one_of) for name, test in f.fields if test.one_of is not None]
    if not equalities:
        return None
    _, name, values = min(equalities, key=lambda found: (found[0], found[1]))
    return name, values


def match_everything(key: str, data: object) -> bool:
    return True
