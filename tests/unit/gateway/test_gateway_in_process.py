"""A whole gateway (hub, connections, sessions, endpoints) driven in process by Starlette's ``TestClient`` over
the in-memory log: plain ASGI (``AsgiTransport``), no Redis, no subprocess. The same behaviour runs against
real uvicorn processes and Redis in ``tests/integration/gateway``; these run in seconds."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from starlette.testclient import TestClient, WebSocketTestSession

from sparkwire.protocol import (
    Ack,
    CloseCode,
    Cursor,
    EntriesFrame,
    ErrorFrame,
    Hello,
    Ping,
    Pong,
    ServerFrame,
    SnapshotPart,
    Welcome,
    encode_ack,
    encode_heartbeat,
    encode_hello,
    parse_server_frame,
)
from sparkwire.replaylog.memory import MemoryBackend, MemoryStreamLog
from sparkwire.replaylog.model import Record

from .in_process import STREAM, running_gateway

pytestmark = pytest.mark.timeout(60)  # a frame that never comes blocks receive(): fail, not hang

@dataclass
class InProcess:
    client: TestClient
    backend: MemoryBackend

    @property
    def log(self) -> MemoryStreamLog:
        return self.backend.stream(STREAM)

    def commit(self, first: int, count: int) -> None:
        """``count`` results, ids ``r<first>``…, one key per ten results."""
        records = [Record(f"r{n}", f"k{n % 10}", json.dumps({"n": n})) for n in range(first, first + count)]
        assert self.client.portal is not None
        self.client.portal.call(self.log.commit, records)

    @contextlib.contextmanager
    def connect(self, **hello: object) -> Iterator[WebSocketTestSession]:
        with self.client.websocket_connect(f"/ws?stream={STREAM}") as ws:
            frame = Hello(version=1, session=None, cursor=None, token=None)
            ws.send_text(encode_hello(Hello(**{**frame.__dict__, **hello})))  # type: ignore[arg-type]
            yield ws


@pytest.fixture
def gateway() -> Iterator[InProcess]:
    with running_gateway() as (client, backend):
        yield InProcess(client, backend)


def frames_until(ws: WebSocketTestSession, last_seq: int) -> tuple[list[ServerFrame], list[int]]:
    """Frames until an entry with ``last_seq`` arrived; and every entry seq received, in order."""
    frames: list[ServerFrame] = []
    seqs: list[int] = []
    while not seqs or seqs[-1] < last_seq:
        frame = parse_server_frame(ws.receive_text())
        frames.append(frame)
        if isinstance(frame, EntriesFrame):
            seqs.extend(entry.seq for entry in frame.entries)
    return frames, seqs


def test_a_fresh_client_gets_a_snapshot_then_every_later_entry_once(gateway: InProcess) -> None:
    gateway.commit(0, 30)
    with gateway.connect() as ws:
        welcome, snapshot = parse_server_frame(ws.receive_text()), parse_server_frame(ws.receive_text())
        assert isinstance(welcome, Welcome) and welcome.reset == "no_position" and welcome.head_seq == 30
        assert isinstance(snapshot, SnapshotPart) and snapshot.seq == 30 and len(snapshot.items) == 10
        assert snapshot.items["k9"].data == {"n": 29}
        gateway.commit(30, 25)
        _, seqs = frames_until(ws, 55)
    assert seqs == list(range(31, 56))


def test_a_cursor_resumes_with_the_history_after_it_then_live(gateway: InProcess) -> None:
    gateway.commit(0, 120)  # more than a page (50) and than the pod's ring (100)
    with gateway.connect(cursor=Cursor(gateway.log.epoch, 7)) as ws:
        welcome = parse_server_frame(ws.receive_text())
        assert isinstance(welcome, Welcome) and welcome.recovered
        gateway.commit(120, 30)
        _, seqs = frames_until(ws, 150)
    assert seqs == list(range(8, 151))


def test_clients_resuming_from_one_seq_get_the_same_frames_packed_once(gateway: InProcess) -> None:
    gateway.commit(0, 60)  # in the ring (100), over one page (50): a run from the ring, then one more
    received: list[list[str]] = []
    for _ in range(3):
        with gateway.connect(cursor=Cursor(gateway.log.epoch, 5)) as ws:
            assert isinstance(parse_server_frame(ws.receive_text()), Welcome)
            texts: list[str] = []
            while not texts or json.loads(texts[-1])["entries"][-1]["seq"] < 60:
                texts.append(ws.receive_text())
            received.append(texts)
    assert received[0] == received[1] == received[2]
    seqs = [entry["seq"] for text in received[0] for entry in json.loads(text)["entries"]]
    assert seqs == list(range(6, 61))


def test_an_ack_is_the_session_s_position_for_the_next_connection(gateway: InProcess) -> None:
    gateway.commit(0, 20)
    with gateway.connect(cursor=Cursor(gateway.log.epoch, 0)) as ws:
        welcome = parse_server_frame(ws.receive_text())
        assert isinstance(welcome, Welcome)
        frames_until(ws, 20)
        ws.send_text(encode_ack(Ack(seq=12, duplicates=0, gaps=0)))
        ws.send_text(encode_heartbeat(Ping(1)))
        assert parse_server_frame(ws.receive_text()) == Pong(1)  # the ack was read before the ping
    # A hello naming only the session resumes after its last ack (flushed to the store at the close).
    with gateway.connect(session=welcome.session) as again:
        resumed = parse_server_frame(again.receive_text())
        assert isinstance(resumed, Welcome) and resumed.session == welcome.session and resumed.recovered
        _, seqs = frames_until(again, 20)
    assert seqs == list(range(13, 21))


def test_a_bad_frame_gets_an_error_and_a_close_and_the_others_are_served(gateway: InProcess) -> None:
    gateway.commit(0, 5)
    epoch = gateway.log.epoch
    with gateway.connect(cursor=Cursor(epoch, 0)) as good, gateway.connect(cursor=Cursor(epoch, 0)) as bad:
        for ws in (good, bad):
            parse_server_frame(ws.receive_text())
            frames_until(ws, 5)
        bad.send_text('{"type": "ack", "seq": "five"}')
        error = parse_server_frame(bad.receive_text())
        assert isinstance(error, ErrorFrame) and error.code == CloseCode.PROTOCOL_VIOLATION
        assert bad.receive()["code"] == CloseCode.PROTOCOL_VIOLATION
        gateway.commit(5, 3)
        assert frames_until(good, 8)[1] == [6, 7, 8]


def test_a_new_epoch_closes_open_connections_with_stream_reset(gateway: InProcess) -> None:
    gateway.commit(0, 3)
    with gateway.connect(cursor=Cursor(gateway.log.epoch, 0)) as ws:
        parse_server_frame(ws.receive_text())
        frames_until(ws, 3)
        gateway.log.new_epoch()
        gateway.commit(0, 1)
        assert ws.receive()["code"] == CloseCode.STREAM_RESET


def test_the_endpoints_answer_from_the_store(gateway: InProcess) -> None:
    gateway.commit(0, 12)
    assert gateway.client.get("/readyz").text == "ready"
    history = gateway.client.get(f"/history?stream={STREAM}&last=5").json()
    assert [entry["seq"] for entry in history["entries"]] == [8, 9, 10, 11, 12]
    assert gateway.client.get(f"/snapshot?stream={STREAM}").json()["seq"] == 12
    with gateway.client.websocket_connect("/ws?stream=other") as unknown:
        assert isinstance(parse_server_frame(unknown.receive_text()), ErrorFrame)
        assert unknown.receive()["code"] == CloseCode.UNKNOWN_STREAM
