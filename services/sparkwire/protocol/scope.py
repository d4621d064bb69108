"""A token's scope and the view it makes with a client's own filter (docs/protocol.md, "Scope").

A scope is a claim per stream, in the filter form (``{"orders": {"tenant": "acme"}}``; ``"*"`` for every
stream the claim does not name). The server ANDs it with the client's filter, so no client widens it; and
on every field the scope constrains, the client's own condition, if it has one, must admit only values the
scope admits: a client that names rows outside its scope (another tenant, or any of several tenants) is
refused (``4423``), not narrowed in silence.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from sparkwire.protocol.encoding import dumps
from sparkwire.protocol.filter_form import (
    FieldTest,
    Filter,
    FilterError,
    filter_document,
    parse_filter,
    short_id,
    within,
)

ANY_STREAM = "*"


class ScopeViolation(Exception):
    """The client's filter names rows outside the token's scope; ``field`` is the first such field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def parse_scope_claim(claim: object) -> dict[str, Filter]:
    """The ``scope`` claim of a token: stream (or ``"*"``) -> its filter. ``FilterError`` when malformed
    (the token is then malformed: ``4401``)."""
    if not isinstance(claim, dict):
        raise FilterError(f"scope must be an object of stream -> filter, got {type(claim).__name__}")
    return {str(stream): parse_filter(value, f"scope.{str(stream)[:64]}") for stream, value in claim.items()}


def scope_for(scopes: dict[str, Filter] | None, stream: str) -> Filter | None:
    """The scope that restricts ``stream``: its own entry, else ``"*"``'s, else none (unrestricted)."""
    if not scopes:
        return None
    return scopes.get(stream, scopes.get(ANY_STREAM))


def admits_only(own: FieldTest, scope: FieldTest) -> bool:
    """Whether every value ``own`` admits, ``scope`` admits too (both in normal form: exact)."""
    if own.null is True or scope.null is True:
        return own.null is True and scope.null is True
    if scope.null is False:
        return True  # own admits only present values
    if own.one_of is not None:
        if scope.one_of is not None:
            return own.one_of <= scope.one_of
        return all(kind == "n" and within(v, scope.lower, scope.upper) for kind, v in own.one_of)  # type: ignore[arg-type]
    if own.null is False or scope.one_of is not None:
        return False  # own admits infinitely many values (every present one, or a non-point interval)
    return _bound_within(own.lower, scope.lower, lower=True) and _bound_within(own.upper, scope.upper, lower=False)


def _bound_within(own: tuple[int | float, bool] | None, scope: tuple[int | float, bool] | None, lower: bool) -> bool:
    if scope is None:
        return True
    if own is None:
        return False
    if own[0] == scope[0]:
        return scope[1] or not own[1]
    return own[0] > scope[0] if lower else own[0] < scope[0]


def effective_filter(scope: Filter | None, own: Filter | None) -> Filter | None:
    """``scope`` AND ``own``; ``ScopeViolation`` if ``own`` names anything outside ``scope``. None: no filter."""
    if scope is None or own is None:
        return own if scope is None else scope
    fields = dict(scope.fields)
    for name, test in own.fields:
        if name in fields and not admits_only(test, fields[name]):
            raise ScopeViolation(name, f"filter.{name[:40]} asks for rows outside the token's scope for this stream")
        fields[name] = test  # within the scope's test: their AND is the client's own
    return Filter(tuple(sorted(fields.items())))


@dataclass(frozen=True)
class View:
    """What one subscription sees: the token's ``scope`` and the client's ``own`` filter. Kept apart (not
    only their AND): a revision outside the scope is never mentioned, one outside ``own`` is a removal."""

    scope: Filter | None
    own: Filter | None

    @cached_property
    def effective(self) -> Filter:
        return effective_filter(self.scope, self.own) or Filter()

    @cached_property
    def id(self) -> str:
        """16 hex digits naming the view (the welcome's ``view``, the cursor's): a position covered under
        one view is no position in another."""
        # No filter and the empty filter admit the same rows: one view.
        scope = filter_document(self.scope) if self.scope and self.scope.fields else None
        own = filter_document(self.own) if self.own and self.own.fields else None
        return short_id(dumps({"own": own, "scope": scope}))


def make_view(scope: Filter | None, own: Filter | None) -> View | None:
    """The view of a subscription, None when unfiltered (no scope, no filter: the protocol as before);
    ``ScopeViolation`` when ``own`` names rows outside ``scope``."""
    if scope is None and own is None:
        return None
    effective_filter(scope, own)  # refuse now, at the hello, not at the first entry
    return View(scope, own)


def position_fits(position_seq: int, position_view: str | None, view: View | None) -> bool:
    """Whether a position (a cursor's, or a session's last ack) covered under ``position_view`` may be
    resumed by a subscription of ``view``; otherwise it starts from a snapshot, reset ``view_changed``.
    Seq 0 ("applied nothing") fits every view, as it fits every epoch."""
    return position_seq == 0 or position_view == (None if view is None else view.id)
