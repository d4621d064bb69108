"""The filter form of a filtered subscription (docs/protocol.md, "Filtered subscriptions"): parsed strictly,
bounded, and brought to one normal form, so two filters that admit the same values are one ``Filter`` (one
evaluation on a pod, one ``filter_id``).

A filter is a JSON object: result field name -> condition, all ANDed; ``"$key"`` names the entry's key.
A condition is a string, number or boolean (equality), or an object of operators: ``eq``, ``in`` (a list:
the only any-of), ``lt``, ``le``, ``gt``, ``ge`` (JSON numbers only), ``isNull`` (a boolean). A missing
field and a JSON null are one thing, *absent*: only ``isNull: true`` admits it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Literal, NoReturn

from sparkwire.protocol.encoding import dumps, reject_constant
from sparkwire.protocol.limits import (
    MAX_FILTER_FIELDS,
    MAX_FILTER_JSON_BYTES,
    MAX_FILTER_STRING_CHARS,
    MAX_FILTER_VALUES,
)

KEY_FIELD = "$key"
Kind = Literal["b", "n", "s"]
# A value tagged with its JSON kind: Python's 1 == True would otherwise merge a number and a boolean.
Value = tuple[Kind, bool | int | float | str]
Bound = tuple[int | float, bool]  # (number, inclusive)
_OPERATORS = ("eq", "in", "lt", "le", "gt", "ge", "isNull")
_KIND_ORDER = {"b": 0, "n": 1, "s": 2}
# Numbers beyond this are refused: comparing them costs as much as their digits, and no result is that large.
_MAX_NUMBER = 1 << 64


class FilterError(ValueError):
    """A filter that is malformed, unsupported, over a limit, or matches nothing; ``reason`` names the part."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _refuse(reason: str) -> NoReturn:
    raise FilterError(reason)


@dataclass(frozen=True)
class FieldTest:
    """What one field must be, in normal form: exactly one of ``null`` (True: absent; False: present),
    ``one_of`` (a finite set of values), or a numeric interval (``lower``/``upper``, at least one)."""

    null: bool | None = None
    one_of: frozenset[Value] | None = None
    lower: Bound | None = None
    upper: Bound | None = None


@dataclass(frozen=True)
class Filter:
    """Conditions on named fields (``KEY_FIELD`` for the entry's key), all ANDed; sorted by name, so equal
    filters are equal objects and hash alike. No fields: every entry matches."""

    fields: tuple[tuple[str, FieldTest], ...] = ()

    def field(self, name: str) -> FieldTest | None:
        return dict(self.fields).get(name)


def tag(value: object) -> Value | None:
    """``value`` with its kind, or None for what no equality admits (absent, objects, lists)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    return None


def within(number: int | float, lower: Bound | None, upper: Bound | None) -> bool:
    if lower is not None and not (number > lower[0] or (lower[1] and number == lower[0])):
        return False
    return upper is None or number < upper[0] or (upper[1] and number == upper[0])


def _tighter(a: Bound | None, b: Bound, is_lower: bool) -> Bound:
    if a is None or a[0] == b[0]:
        return b if a is None else (b[0], a[1] and b[1])
    return max(a, b) if is_lower else min(a, b)


def _number(where: str, value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _refuse(f"{where} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or abs(value) >= _MAX_NUMBER:
        _refuse(f"{where} must be a finite number below 2^64 in size, got {value!r:.40}")
    # One number, one form: 2.0 and 2 admit the same values, so they are one canonical filter.
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _scalar(where: str, value: object, key: bool) -> Value:
    if value is None:
        _refuse(f"{where} is null: use {{\"isNull\": true}} to ask for an absent field")
    if isinstance(value, str):
        if len(value) > MAX_FILTER_STRING_CHARS:
            _refuse(f"{where} is longer than {MAX_FILTER_STRING_CHARS} characters")
        return ("s", value)
    if key:
        _refuse(f"{where} must be a string (keys are strings), got {type(value).__name__}")
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", _number(where, value))
    _refuse(f"{where} must be a string, number or boolean, got {type(value).__name__}")


def _normal(where: str, test: FieldTest) -> FieldTest:
    """``test`` in normal form, or refused when it admits no value at all (a mistake worth saying)."""
    null, one_of, lower, upper = test.null, test.one_of, test.lower, test.upper
    has_values = one_of is not None or lower is not None or upper is not None
    if null and has_values:
        _refuse(f"{where} matches nothing: isNull true admits only an absent field, which no other condition does")
    if one_of is not None and (lower is not None or upper is not None):
        one_of = frozenset(v for v in one_of if v[0] == "n" and within(v[1], lower, upper))  # type: ignore[arg-type]
        lower = upper = None
    if lower is not None and upper is not None:
        if lower[0] > upper[0] or (lower[0] == upper[0] and not (lower[1] and upper[1])):
            _refuse(f"{where} matches nothing: its bounds leave no number")
        if lower[0] == upper[0]:
            one_of, lower, upper = frozenset({("n", lower[0])}), None, None
    if one_of is not None and not one_of:
        _refuse(f"{where} matches nothing: no listed value meets its other conditions")
    return FieldTest(null=null if not has_values else None, one_of=one_of, lower=lower, upper=upper)


def _condition(where: str, raw: object, key: bool, budget: list[int]) -> FieldTest:
    if not isinstance(raw, dict):
        if isinstance(raw, list):
            _refuse(f"{where} is a list: use {{\"in\": [...]}} for any of several values")
        return FieldTest(one_of=frozenset({_scalar(where, raw, key)}))
    if not raw:
        _refuse(f"{where} has no operator; expected some of {list(_OPERATORS)}")
    unknown = sorted(set(raw) - set(_OPERATORS))
    if unknown:
        _refuse(f"{where} has unknown operators {unknown[:5]}; expected some of {list(_OPERATORS)}")
    if key and set(raw) - {"eq", "in"}:
        _refuse(f"{where} supports only eq and in (keys are strings, never absent)")
    one_of: frozenset[Value] | None = None
    for op in ("eq", "in"):
        if op not in raw:
            continue
        values = [raw[op]] if op == "eq" else raw[op]
        if op == "in" and (not isinstance(values, list) or not values):
            _refuse(f"{where}.in must be a non-empty list")
        budget[0] -= len(values)
        if budget[0] < 0:
            _refuse(f"filter lists more than {MAX_FILTER_VALUES} values")
        tagged = frozenset(_scalar(f"{where}.{op}", v, key) for v in values)
        one_of = tagged if one_of is None else one_of & tagged
    lower = upper = None
    for op, is_lower, inclusive in (("gt", True, False), ("ge", True, True), ("lt", False, False),
                                    ("le", False, True)):
        if op in raw:
            bound = (_number(f"{where}.{op}", raw[op]), inclusive)
            if is_lower:
                lower = _tighter(lower, bound, True)
            else:
                upper = _tighter(upper, bound, False)
    null = raw.get("isNull")
    if null is not None and not isinstance(null, bool):
        _refuse(f"{where}.isNull must be true or false, got {type(null).__name__}")
    return _normal(where, FieldTest(null=null, one_of=one_of, lower=lower, upper=upper))


def parse_filter(value: object, where: str = "filter") -> Filter:
    """``value`` (parsed JSON) as a ``Filter``, or ``FilterError`` naming what is wrong with it."""
    if not isinstance(value, dict):
        _refuse(f"{where} must be an object of field -> condition, got {type(value).__name__}")
    if len(value) > MAX_FILTER_FIELDS:
        _refuse(f"{where} names more than {MAX_FILTER_FIELDS} fields")
    budget = [MAX_FILTER_VALUES]
    fields = []
    for name, raw in value.items():
        if not isinstance(name, str) or not name or len(name) > MAX_FILTER_STRING_CHARS:
            _refuse(f"{where} field names must be 1-{MAX_FILTER_STRING_CHARS} characters")
        if name.startswith("$") and name != KEY_FIELD:
            _refuse(f"{where}.{name[:40]}: names starting with '$' are reserved; {KEY_FIELD} is the entry's key")
        fields.append((name, _condition(f"{where}.{name[:40]}", raw, name == KEY_FIELD, budget)))
    return Filter(tuple(sorted(fields)))


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    document: dict[str, object] = {}
    for key, item in pairs:
        if key in document:
            _refuse(f"field {key[:40]!r} appears twice")
        document[key] = item
    return document


def parse_filter_json(text: str, max_bytes: int = MAX_FILTER_JSON_BYTES, where: str = "filter") -> Filter:
    """A filter given as JSON text (``/history`` and ``/snapshot``'s ``filter`` parameter, URL-decoded)."""
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        _refuse(f"{where} is larger than {max_bytes} bytes")
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=reject_constant)
    except (ValueError, RecursionError) as error:  # FilterError from the hook is a ValueError too
        if isinstance(error, FilterError):
            raise
        _refuse(f"{where} is not JSON: {error}")
    return parse_filter(document, where)


def _value_order(value: Value) -> tuple[int, object]:
    return (_KIND_ORDER[value[0]], value[1])


def condition_document(test: FieldTest) -> dict[str, object]:
    """``test`` in the canonical wire form: explicit operators, ``in`` sorted, no shorthand."""
    if test.null is not None:
        return {"isNull": test.null}
    if test.one_of is not None:
        values = [v[1] for v in sorted(test.one_of, key=_value_order)]
        return {"eq": values[0]} if len(values) == 1 else {"in": values}
    document: dict[str, object] = {}
    if test.lower is not None:
        document["ge" if test.lower[1] else "gt"] = test.lower[0]
    if test.upper is not None:
        document["le" if test.upper[1] else "lt"] = test.upper[0]
    return document


def filter_document(f: Filter) -> dict[str, object]:
    return {name: condition_document(test) for name, test in f.fields}


def canonical_json(f: Filter) -> str:
    """One text per filter: ``parse_filter_json(canonical_json(f)) == f``, and equal filters, equal texts."""
    return dumps(filter_document(f))


def short_id(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()[:16]


def filter_id(f: Filter) -> str:
    """16 hex digits naming the filter (logs, metrics, sharing one evaluation among a pod's clients)."""
    return short_id(canonical_json(f))
