"""The filtered subscriptions a kind scenario runs beside its plain clients: a client's own filter, a token
scoped to one tenant's rows, and both together. Each carries its oracle, ``admits``: which results of the
metrics job the view holds, written here from the protocol's text (docs/protocol.md, "The filter form"),
not with ``sparkwire.protocol``'s matcher, so a wrong matcher in the gateway cannot agree with its own check.

The metrics job's results (``metricName`` the key, ``count`` the window's events, 40 metrics at 200 events
a second and 10 s windows: ~50 a window each) make the conditions select real, changing subsets."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# The rows one tenant's token may read: four of the run's 40 metrics.
TENANT_METRICS = ("metric-4", "metric-5", "metric-6", "metric-7")
TENANT_FILTER: Mapping[str, object] = {"metricName": {"in": list(TENANT_METRICS)}}
BUSY_COUNT = 50  # about half of a window's results have at least this many events


def is_number(value: object) -> bool:
    """A JSON number: ``True`` is no number, as JSON keeps booleans apart."""
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class ClientView:
    name: str
    filter: Mapping[str, object] | None  # the hello's filter
    scoped: bool  # connects with the release's tenant token (views.TENANT_FILTER) rather than the plain one
    admits: Callable[[Mapping[str, Any]], bool]  # the oracle: does the view hold this result


VIEWS = (
    ClientView("three metrics", {"metricName": {"in": ["metric-0", "metric-1", "metric-2"]}}, scoped=False,
               admits=lambda data: data.get("metricName") in {"metric-0", "metric-1", "metric-2"}),
    ClientView(f"windows of at least {BUSY_COUNT} events", {"count": {"ge": BUSY_COUNT}}, scoped=False,
               admits=lambda data: is_number(data.get("count")) and data["count"] >= BUSY_COUNT),
    ClientView("a tenant's token", None, scoped=True,
               admits=lambda data: data.get("metricName") in TENANT_METRICS),
    ClientView("a tenant's token, one metric asked for", {"metricName": "metric-5"}, scoped=True,
               admits=lambda data: data.get("metricName") == "metric-5"),
)


def views_for(tenant_token: str | None) -> tuple[ClientView, ...]:
    """The views a release can serve: the scoped ones only when its gateways check tokens."""
    return tuple(v for v in VIEWS if tenant_token is not None or not v.scoped)
