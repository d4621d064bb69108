"""Filtered and scoped clients in a chaos run, and their oracle.

A **profile** is what a planned client subscribes to: its own ``filter`` (the hello's), the ``scope`` its
token carries for the stream, or both. Each filtered client is checked against its own oracle: the results
the run computed independently, kept by :func:`admits`, this module's own reading of the filter form
(docs/protocol.md, "The filter form") — written here from the document, sharing no code with the gateway's
``sparkwire.protocol.filter_match``, so a bug there cannot hide in the oracle as well. The view is the scope
AND the filter: :func:`admits_view`.

In an update-mode stream (revisions per key), :func:`update_oracle` follows what a client holding the
view's newest revisions must see: an entry for each revision within the scope that matches, a removal of a
held key once its newest revision within the scope stops matching, and what it holds at the end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.protocol.filter_form import parse_filter

Document = Mapping[str, Any]
"""A filter in the documented JSON form: name -> condition."""


@dataclass(frozen=True)
class Profile:
    name: str
    filter: Document | None = None
    scope: Document | None = None


# The metrics stream (append mode): results {metricName, windowStart, windowEnd, count, sum, min, max, avg},
# keyed by metricName, metric-0 .. metric-3 (the producer's default), ~50 events per metric and window.
# Conditions on count only among the numbers: the oracle's floats (avg, sum) are Python's, the log's Spark's;
# they may differ in the last bit, so a comparison at a float boundary could differ for no fault of either.
METRIC_PROFILES: tuple[Profile, ...] = (  # in the order schedule.py hands them out: scoped ones first
    Profile("scoped", scope={"$key": {"in": ["metric-0", "metric-3"]}}),
    Profile("keys", filter={"$key": {"in": ["metric-0", "metric-2"]}}),
    Profile("scoped+filter", scope={"metricName": {"in": ["metric-1", "metric-2"]}},
            filter={"metricName": "metric-2", "count": {"gt": 45}}),
    Profile("null", filter={"region": {"isNull": True}, "avg": {"isNull": False}, "count": {"lt": 50},
                            "metricName": {"in": ["metric-1", "metric-3"]}}),
    Profile("count", filter={"count": {"ge": 50}}),
    Profile("eq", filter={"metricName": "metric-1"}),
)
# The orders stream (update mode): revisions {windowStart, windowEnd, region, orders, revenue, largestOrder,
# ...} keyed by region; a region's newest revision moves out of "orders >= 3" whenever a new window of it
# opens, and back in as orders arrive: removals and move-ins all along.
ORDER_PROFILES: tuple[Profile, ...] = (
    Profile("busy", filter={"orders": {"ge": 3}}),
    Profile("scoped+busy", scope={"$key": {"in": ["eu-west", "us-east"]}}, filter={"orders": {"ge": 2}}),
    Profile("scoped", scope={"region": {"in": ["eu-west", "ap-south"]}}),
)
BY_NAME = {p.name: p for p in METRIC_PROFILES}


def token(secret: str, stream: str, profile: Profile, ttl: int, *, subject: str) -> str:
    """A token for ``stream`` signed with the run's secret, with the profile's ``scope`` for that stream if it
    has one (the claim ``{"scope": {stream: filter}}``, docs/protocol.md "The scope from the token")."""
    scope = {stream: parse_filter(dict(profile.scope), "scope")} if profile.scope is not None else None
    return issue_token(secret, [stream], ttl, subject=subject, now=int(time.time()), scope=scope)


def _present(data: Any, name: str, key: str) -> tuple[bool, Any]:
    """Whether the entry has the field (absent and JSON null are one), and its value."""
    if name == "$key":
        return True, key
    if not isinstance(data, Mapping) or data.get(name) is None:
        return False, None
    return True, data[name]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _equal(a: Any, b: Any) -> bool:
    """The same JSON kind and value: numbers by value, never a number for a bool or a string."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) and _number(b):
        return float(a) == float(b)
    return isinstance(a, str) and isinstance(b, str) and a == b


def _condition(condition: Any, present: bool, value: Any) -> bool:
    if not isinstance(condition, Mapping):
        condition = {"eq": condition}
    for operator, operand in condition.items():
        if operator == "isNull":
            if present == bool(operand):
                return False
        elif not present:
            return False  # only isNull admits an absent field
        elif operator == "eq":
            if not _equal(value, operand):
                return False
        elif operator == "in":
            if not any(_equal(value, o) for o in operand):
                return False
        elif operator in ("lt", "le", "gt", "ge"):
            if not _number(value):
                return False
            ok = {"lt": value < operand, "le": value <= operand, "gt": value > operand, "ge": value >= operand}
            if not ok[operator]:
                return False
        else:
            raise ValueError(f"unknown operator {operator!r}")
    return True


def admits(document: Document | None, key: str, data: Any) -> bool:
    """Whether the filter ``document`` (None: no filter) admits the entry of ``key`` holding ``data``."""
    if document is None:
        return True
    return all(_condition(condition, *_present(data, name, key)) for name, condition in document.items())


def admits_view(profile: Profile, key: str, data: Any) -> bool:
    return admits(profile.scope, key, data) and admits(profile.filter, key, data)


Row = tuple[int, str, str, Any]
"""A log entry as the oracle sees it: seq, processingId, key, data."""


@dataclass
class UpdateOracle:
    """What a client of an update-mode view applies, from the first entry on: entries as (seq, processingId),
    removals as (seq, key), and what it holds at the end, key -> (seq, processingId)."""

    entries: list[tuple[int, str]] = field(default_factory=list)
    removals: list[tuple[int, str]] = field(default_factory=list)
    state: dict[str, tuple[int, str]] = field(default_factory=dict)


def update_oracle(profile: Profile, rows: Iterable[Row]) -> UpdateOracle:
    """In seq order: a revision outside the scope is never mentioned; one within it that matches the filter
    is an entry (a move-in when the key was out); one that does not match removes a held key, once."""
    oracle = UpdateOracle()
    for seq, pid, key, data in sorted(rows, key=lambda row: row[0]):
        if not admits(profile.scope, key, data):
            continue
        if admits(profile.filter, key, data):
            oracle.entries.append((seq, pid))
            oracle.state[key] = (seq, pid)
        elif key in oracle.state:
            oracle.removals.append((seq, key))
            del oracle.state[key]
    return oracle
