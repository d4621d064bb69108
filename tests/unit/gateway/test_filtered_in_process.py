"""Filtered, tenant-scoped subscriptions (issue 43) through a whole gateway in process (Starlette's
``TestClient`` over the in-memory log): each filtered client checked with the client's own coverage
(``ViewCoverage``) against the entries its view admits, computed here independently."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import jwt
import pytest
from starlette.testclient import TestClient, WebSocketTestSession

from sparkwire.client.coverage import ViewCoverage
from sparkwire.protocol import (
    Ack,
    CloseCode,
    Cursor,
    EntriesFrame,
    ErrorFrame,
    Hello,
    Ping,
    Pong,
    Removal,
    ServerFrame,
    SnapshotPart,
    ViewEntriesFrame,
    Welcome,
    encode_ack,
    encode_heartbeat,
    encode_hello,
    parse_server_frame,
)
from sparkwire.replaylog.memory import MemoryBackend, MemoryStreamLog
from sparkwire.replaylog.model import Record

from .in_process import STREAM, running_gateway

pytestmark = pytest.mark.timeout(60)

SECRET = "in-process-secret-with-enough-bytes-for-hs256"
TENANTS = ("acme", "globex")


def row(n: int) -> dict[str, object]:
    """Result ``n``: tenant alternating, ``closedAt`` absent, null or a number in turn."""
    data: dict[str, object] = {"n": n, "tenant": TENANTS[n % 2]}
    if n % 3 == 1:
        data["closedAt"] = None
    elif n % 3 == 2:
        data["closedAt"] = n
    return data


@dataclass
class InProcess:
    client: TestClient
    backend: MemoryBackend

    @property
    def log(self) -> MemoryStreamLog:
        return self.backend.stream(STREAM)

    def commit(self, first: int, count: int) -> None:
        records = [Record(f"r{n}", f"k{n % 10}", json.dumps(row(n))) for n in range(first, first + count)]
        assert self.client.portal is not None
        self.client.portal.call(self.log.commit, records)

    def token(self, scope: dict[str, object] | None = None) -> str:
        """A token for the stream, with the ``scope`` claim as given (unparsed: a malformed one too)."""
        now = int(time.time())
        claims = {"sub": "client", "streams": [STREAM], "iat": now, "exp": now + 600}
        return jwt.encode(claims if scope is None else {**claims, "scope": scope}, SECRET, algorithm="HS256")

    @contextlib.contextmanager
    def connect(self, filter: object = None, cursor: Cursor | None = None, scope: dict[str, object] | None = None,
                session: str | None = None) -> Iterator[WebSocketTestSession]:
        with self.client.websocket_connect(f"/ws?stream={STREAM}") as ws:
            hello = encode_hello(Hello(1, session, cursor, self.token(scope)))
            if filter is not None:  # as a client sends it, unparsed: the gateway's parsing is under test
                hello = json.dumps({**json.loads(hello), "filter": filter})
            ws.send_text(hello)
            yield ws


@pytest.fixture
def gateway() -> Iterator[InProcess]:
    with running_gateway(SECRET) as (client, backend):
        yield InProcess(client, backend)


def receive(ws: WebSocketTestSession) -> ServerFrame:
    return parse_server_frame(ws.receive_text())


def covered_until(ws: WebSocketTestSession, coverage: ViewCoverage, through: int) -> tuple[list[int], list[int]]:
    """Filtered frames until ``through`` is covered, each checked by ``coverage`` (a gap or a repeat fails):
    the seqs of the entries and of the removals received."""
    entries: list[int] = []
    removals: list[int] = []
    while coverage.covered < through:
        frame = receive(ws)
        assert isinstance(frame, ViewEntriesFrame), frame
        covered = coverage.observe(frame)
        assert covered.verdict == "next", (covered, coverage.covered, frame)
        for item in covered.fresh:
            (removals if isinstance(item, Removal) else entries).append(item.seq)
    return entries, removals


def seqs_where(first: int, last: int, admits: Callable[[dict[str, object]], bool]) -> list[int]:
    """Seqs of the log (seq n + 1 holds result n) in [first, last] whose result ``admits``."""
    return [seq for seq in range(first, last + 1) if admits(row(seq - 1))]


def start(ws: WebSocketTestSession) -> tuple[Welcome, ViewCoverage]:
    welcome = receive(ws)
    assert isinstance(welcome, Welcome), welcome
    coverage = ViewCoverage()
    if not welcome.recovered:
        snapshot = receive(ws)
        assert isinstance(snapshot, SnapshotPart) and not snapshot.more
        coverage.reset(snapshot.seq, snapshot.digest)
    return welcome, coverage


def test_a_filtered_client_gets_exactly_its_entries_with_chained_coverage(gateway: InProcess) -> None:
    gateway.commit(0, 20)
    with gateway.connect(filter={"n": {"ge": 25, "lt": 60}}) as ws:
        welcome, coverage = start(ws)
        assert welcome.view is not None and len(welcome.view) == 16 and welcome.reset == "no_position"
        gateway.commit(20, 60)
        entries, removals = covered_until(ws, coverage, 80)
    assert entries == seqs_where(21, 80, lambda r: 25 <= int(r["n"]) < 60)  # type: ignore[call-overload]
    assert removals == []  # an append-mode stream (no descriptor) never removes


def test_nullable_fields_absent_or_null_are_one_and_the_snapshot_is_filtered(gateway: InProcess) -> None:
    gateway.commit(0, 30)
    cases: list[tuple[bool, Callable[[dict[str, object]], bool]]] = [
        (True, lambda r: r.get("closedAt") is None), (False, lambda r: r.get("closedAt") is not None)]
    for is_null, admitted in cases:
        with gateway.connect(filter={"closedAt": {"isNull": is_null}}, cursor=Cursor(gateway.log.epoch, 0)) as ws:
            welcome, coverage = start(ws)
            assert welcome.recovered
            entries, _ = covered_until(ws, coverage, 30)
        assert entries == seqs_where(1, 30, admitted)  # absent and null alike
        with gateway.connect(filter={"closedAt": {"isNull": is_null}}) as ws:
            assert isinstance(receive(ws), Welcome)
            snapshot = receive(ws)
        assert isinstance(snapshot, SnapshotPart) and snapshot.seq == 30 and snapshot.items
        assert all(admitted(item.data) for item in snapshot.items.values())  # type: ignore[arg-type]
        assert len(snapshot.items) == sum(1 for n in range(20, 30) if admitted(row(n)))


def test_position_frames_move_the_cursor_while_nothing_matches(gateway: InProcess) -> None:
    with gateway.connect(filter={"n": -1}) as ws:
        _, coverage = start(ws)
        gateway.commit(0, 5)
        frame = receive(ws)  # within about a second, though nothing matched
        assert isinstance(frame, ViewEntriesFrame) and frame.items == () and frame.through == 5
        assert coverage.observe(frame).verdict == "next" and coverage.digest == frame.digest


def test_a_resume_from_a_covered_position_neither_rescans_nor_repeats_nor_skips(gateway: InProcess) -> None:
    gateway.commit(0, 40)
    wanted = {"tenant": "acme", "n": {"lt": 70}}
    with gateway.connect(filter=wanted, cursor=Cursor(gateway.log.epoch, 0)) as ws:
        welcome, coverage = start(ws)
        first, _ = covered_until(ws, coverage, 40)
    gateway.commit(40, 60)
    cursor = Cursor(gateway.log.epoch, coverage.covered, coverage.digest, welcome.view)
    with gateway.connect(filter=wanted, cursor=cursor) as ws:
        again, coverage_again = start(ws)
        coverage_again.reset(coverage.covered, coverage.digest)
        assert again.recovered and again.view == welcome.view
        frame = receive(ws)
        assert isinstance(frame, ViewEntriesFrame) and frame.after == 40  # continues at its position
        assert coverage_again.observe(frame).verdict == "next"
        rest = [item.seq for item in frame.items]
        more, _ = covered_until(ws, coverage_again, 100)
    assert first + rest + more == seqs_where(1, 100, lambda r: r["tenant"] == "acme" and int(r["n"]) < 70)  # type: ignore[call-overload]


def test_a_cursor_of_another_view_gets_a_snapshot(gateway: InProcess) -> None:
    gateway.commit(0, 10)
    with gateway.connect(filter={"tenant": "acme"}, cursor=Cursor(gateway.log.epoch, 5)) as ws:
        welcome = receive(ws)
        assert isinstance(welcome, Welcome) and not welcome.recovered and welcome.reset == "view_changed"
    with gateway.connect(cursor=Cursor(gateway.log.epoch, 5, view="0123456789abcdef")) as ws:
        welcome = receive(ws)
        assert isinstance(welcome, Welcome) and welcome.reset == "view_changed" and welcome.view is None


def test_the_scope_is_anded_with_the_filter(gateway: InProcess) -> None:
    gateway.commit(0, 10)
    scope: dict[str, object] = {STREAM: {"tenant": "acme"}}
    with gateway.connect(filter={"n": {"ge": 4}}, scope=scope, cursor=Cursor(gateway.log.epoch, 0)) as ws:
        _, coverage = start(ws)
        gateway.commit(10, 10)
        entries, _ = covered_until(ws, coverage, 20)
    assert entries == seqs_where(1, 20, lambda r: r["tenant"] == "acme" and int(r["n"]) >= 4)  # type: ignore[call-overload]
    with gateway.connect(scope={"*": {"tenant": "globex"}}, cursor=Cursor(gateway.log.epoch, 0)) as ws:
        welcome, coverage = start(ws)
        assert welcome.view is not None  # a scope alone makes a view
        entries, _ = covered_until(ws, coverage, 20)
    assert entries == seqs_where(1, 20, lambda r: r["tenant"] == "globex")


@pytest.mark.parametrize(("filter", "scope", "code", "named"), [
    ({"n": {"gt": "x"}}, None, CloseCode.INVALID_FILTER, "hello.filter.n.gt"),
    ({"n": {"gt": 5, "lt": 3}}, None, CloseCode.INVALID_FILTER, "hello.filter.n"),
    ({"tenant": "globex"}, {STREAM: {"tenant": "acme"}}, CloseCode.OUTSIDE_SCOPE, "tenant"),
    ({"tenant": {"in": ["acme", "globex"]}}, {"*": {"tenant": "acme"}}, CloseCode.OUTSIDE_SCOPE, "tenant"),
])
def test_a_bad_filter_or_one_outside_the_scope_is_refused_with_an_error_frame(
    gateway: InProcess, filter: object, scope: dict[str, object] | None, code: CloseCode, named: str
) -> None:
    with gateway.connect(filter=filter, scope=scope) as ws:
        error = receive(ws)
        assert isinstance(error, ErrorFrame) and error.code == code and named in error.reason
        assert ws.receive()["code"] == code


def test_a_malformed_scope_claim_is_a_malformed_token(gateway: InProcess) -> None:
    with gateway.connect(scope={STREAM: {"tenant": {"eq": None}}}) as ws:
        error = receive(ws)
        assert isinstance(error, ErrorFrame) and error.code == CloseCode.AUTH_FAILED and "scope" in error.reason


def test_unfiltered_clients_beside_filtered_ones_are_unaffected(gateway: InProcess) -> None:
    gateway.commit(0, 5)
    epoch = gateway.log.epoch
    with (gateway.connect(filter={"tenant": "acme"}, cursor=Cursor(epoch, 0)) as filtered,
          gateway.connect(cursor=Cursor(epoch, 0)) as plain):
        _, coverage = start(filtered)
        plain_welcome = receive(plain)
        assert isinstance(plain_welcome, Welcome) and plain_welcome.view is None
        gateway.commit(5, 20)
        seqs: list[int] = []
        while not seqs or seqs[-1] < 25:
            frame = receive(plain)
            assert isinstance(frame, EntriesFrame)  # the plain frame: no after, through or removals
            seqs.extend(entry.seq for entry in frame.entries)
        entries, _ = covered_until(filtered, coverage, 25)
    assert seqs == list(range(1, 26))
    assert entries == seqs_where(1, 25, lambda r: r["tenant"] == "acme")


def test_update_mode_removes_a_key_that_moved_out(gateway: InProcess) -> None:
    gateway.log.stored_descriptor = json.dumps({"mode": "update"})
    with gateway.connect(filter={"n": {"lt": 12}}, cursor=Cursor("", 0)) as ws:
        _, coverage = start(ws)
        gateway.commit(0, 25)  # keys k0..k9: first below 12 (delivered), then above (removed once each)
        entries, removals = covered_until(ws, coverage, 25)
    assert entries == list(range(1, 13))
    assert removals == list(range(13, 23))  # each key's first revision out; later ones are not mentioned


def test_a_connection_opened_before_the_descriptor_gets_the_update_streams_removals(gateway: InProcess) -> None:
    """A page opened before its job's first commit: no descriptor, so no mode, when it connects. The
    writer stores the descriptor before its first batch (spark/delivery/sink.py); the hub reads it before
    it hands that batch out, and the connection's sender follows, so the moves out are removed (the chaos
    run's update-mode clients found them missing)."""
    with gateway.connect(filter={"n": {"lt": 12}}, cursor=Cursor("", 0)) as ws:
        _, coverage = start(ws)
        gateway.log.stored_descriptor = json.dumps({"mode": "update"})
        gateway.commit(0, 25)
        entries, removals = covered_until(ws, coverage, 25)
    assert entries == list(range(1, 13))
    assert removals == list(range(13, 23))


def test_acks_are_checked_against_the_last_through_sent(gateway: InProcess) -> None:
    gateway.commit(0, 10)
    with gateway.connect(filter={"tenant": "acme", "n": {"lt": 3}}, cursor=Cursor(gateway.log.epoch, 0)) as ws:
        _, coverage = start(ws)
        entries, _ = covered_until(ws, coverage, 10)
        assert entries == [1, 3] and coverage.covered == 10  # acked beyond the last entry: covered
        ws.send_text(encode_ack(Ack(seq=10, duplicates=0, gaps=0, digest=coverage.digest)))
        ws.send_text(encode_ack(Ack(seq=11, duplicates=0, gaps=0)))
        error = receive(ws)
        assert isinstance(error, ErrorFrame) and error.code == CloseCode.PROTOCOL_VIOLATION
        assert "ack of seq 11 outside 10..10" in error.reason


def test_a_session_keeps_the_view_of_its_acks(gateway: InProcess) -> None:
    gateway.commit(0, 10)
    wanted = {"tenant": "acme"}
    with gateway.connect(filter=wanted, cursor=Cursor(gateway.log.epoch, 0)) as ws:
        welcome, coverage = start(ws)
        covered_until(ws, coverage, 10)
        ws.send_text(encode_ack(Ack(seq=10, duplicates=0, gaps=0, digest=coverage.digest)))
        ws.send_text(encode_heartbeat(Ping(1)))
        assert receive(ws) == Pong(1)  # the ack was read before the ping
    gateway.commit(10, 10)
    with gateway.connect(filter=wanted, session=welcome.session) as ws:  # the session alone: same view resumes
        again = receive(ws)
        assert isinstance(again, Welcome) and again.recovered and again.view == welcome.view
        frame = receive(ws)
        assert isinstance(frame, ViewEntriesFrame) and frame.after == 10
    for other in ({"tenant": "globex"}, None):  # another view, or none: a snapshot, not a resume that skips
        with gateway.connect(filter=other, session=welcome.session) as ws:
            changed = receive(ws)
            assert isinstance(changed, Welcome) and changed.reset == "view_changed", changed
