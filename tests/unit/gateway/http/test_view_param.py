"""``/snapshot`` and ``/history`` with a ``filter`` and the token's scope (issue 43), through a whole gateway
in process: the items and entries in the view, its id, the digest at ``seq``, 400 / 403 refusals; and a page
that goes on live from a filtered history misses nothing."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from sparkwire.client.coverage import ViewCoverage
from sparkwire.protocol import Cursor, Welcome

from ..test_filtered_in_process import STREAM, InProcess, covered_until, receive, seqs_where
from ..test_filtered_in_process import gateway as gateway  # the fixture

pytestmark = pytest.mark.timeout(60)


def read(gateway: InProcess, path: str, filter: object = None, scope: dict[str, object] | None = None,
         status: int = 200) -> dict[str, object]:
    query = f"/{path}?stream={STREAM}" + ("" if filter is None else f"&filter={quote(json.dumps(filter))}")
    answer = gateway.client.get(query, headers={"Authorization": f"Bearer {gateway.token(scope)}"})
    assert answer.status_code == status, answer.text
    document: dict[str, object] = answer.json()
    return document


def test_a_filtered_snapshot_holds_the_view_s_items_and_names_it(gateway: InProcess) -> None:
    gateway.commit(0, 20)
    plain = read(gateway, "snapshot")
    assert "view" not in plain and len(plain["items"]) == 10  # type: ignore[arg-type]
    acme = read(gateway, "snapshot", {"tenant": "acme"})
    assert acme["seq"] == 20 and isinstance(acme["view"], str) and len(acme["view"]) == 16
    assert {item["data"]["tenant"] for item in acme["items"].values()} == {"acme"}  # type: ignore[attr-defined]
    scoped = read(gateway, "snapshot", scope={STREAM: {"tenant": "acme"}})
    assert scoped["items"] == acme["items"] and scoped["view"] != acme["view"]  # a scope's view is its own


@pytest.mark.parametrize("path", ["snapshot", "history"])
def test_a_bad_filter_is_a_400_and_one_outside_the_scope_a_403(gateway: InProcess, path: str) -> None:
    gateway.commit(0, 3)
    bad = read(gateway, path, {"n": {"gt": "x"}}, status=400)
    assert "filter.n.gt" in str(bad["error"])
    assert "4096" in str(read(gateway, path, {"tenant": "x" * 5000}, status=400)["error"])
    outside = read(gateway, path, {"tenant": "globex"}, scope={"*": {"tenant": "acme"}}, status=403)
    assert "scope" in str(outside["error"])


def test_a_filtered_history_then_live_from_its_position(gateway: InProcess) -> None:
    gateway.commit(0, 30)
    wanted = {"tenant": "globex", "closedAt": {"isNull": True}}
    history = read(gateway, "history", wanted, scope={STREAM: {"n": {"ge": 10}}})
    admitted = lambda r: r["tenant"] == "globex" and r.get("closedAt") is None and int(r["n"]) >= 10  # noqa: E731
    assert [e["seq"] for e in history["entries"]] == seqs_where(11, 30, admitted)  # type: ignore[attr-defined]
    assert history["last"] == 2000 and history["seq"] == 30 and isinstance(history["digest"], str)
    assert all(admitted(item["data"]) for item in history["items"].values())  # type: ignore[attr-defined]
    gateway.commit(30, 20)
    cursor = Cursor(str(history["epoch"]), 30, str(history["digest"]), str(history["view"]))
    with gateway.connect(filter=wanted, cursor=cursor, scope={STREAM: {"n": {"ge": 10}}}) as ws:
        welcome = receive(ws)
        assert isinstance(welcome, Welcome) and welcome.recovered and welcome.view == history["view"]
        entries, _ = covered_until(ws, ViewCoverage(30, str(history["digest"])), 50)
    assert entries == seqs_where(31, 50, admitted)


def test_a_scoped_token_reads_no_row_outside_its_scope_by_any_http_endpoint(gateway: InProcess) -> None:
    """Without a filter of its own, a token scoped to acme gets acme's rows only from ``/snapshot`` and
    ``/history``; ``/streams`` and ``/descriptor`` carry no rows at all (names, how a stream is drawn).
    ``/ws`` and SSE: test_filtered_in_process.py and tests/integration/gateway/test_filtered.py."""
    gateway.commit(0, 20)
    scope: dict[str, object] = {STREAM: {"tenant": "acme"}}
    snapshot = read(gateway, "snapshot", scope=scope)
    assert snapshot["items"] and {i["data"]["tenant"] for i in snapshot["items"].values()} == {"acme"}  # type: ignore[attr-defined]
    history = read(gateway, "history", scope=scope)
    assert [e["seq"] for e in history["entries"]] == seqs_where(1, 20, lambda r: r["tenant"] == "acme")  # type: ignore[attr-defined]
    assert {i["data"]["tenant"] for i in history["items"].values()} == {"acme"}  # type: ignore[attr-defined]
    streams = gateway.client.get("/streams", headers={"Authorization": f"Bearer {gateway.token(scope)}"})
    assert streams.status_code == 200 and streams.json() == {"streams": [STREAM]}
    descriptor = gateway.client.get(f"/descriptor?stream={STREAM}",
                                    headers={"Authorization": f"Bearer {gateway.token(scope)}"})
    assert "globex" not in descriptor.text
