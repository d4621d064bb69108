"""The server half of docs/protocol-conformance.yaml, against one live gateway, over both transports
(WebSocket and Server-Sent Events): every case's frames, in order, and its close code (with or without the
error frame before it) as the table says."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import pytest
import redis as redis_lib
import yaml
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from sparkwire.gateway.auth.tokens import ALGORITHM, issue_token
from sparkwire.protocol import parse_filter
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

from .conftest import SECRET
from .sse_client import SseConversation, sse_connection

TABLE = yaml.safe_load((Path(__file__).resolve().parents[3] / "docs" / "protocol-conformance.yaml").read_text())
SERVER_CASES = {case["id"]: case for case in TABLE["server"]}
ALLOWED_ORIGIN = "https://app.example"
SUBJECT = "conformance"
# The server's own pings come later than any case lasts (the longest, cursor-ahead, ~19 s), so none
# interleaves with the frames a case expects (at the default 20 s one did, on a slow CI run).
SERVER_PING_INTERVAL_MS = 120_000
QUIET_S = 0.4  # no frame for this long after the last one sent: the server said all it will say for now


def stream_of(case: dict[str, Any]) -> str:
    return "not-served-here" if case.get("stream", {}).get("name") == "unserved" else f"conf-{case['id']}"


@dataclass
class Conversation:
    frames: list[dict[str, Any]] = field(default_factory=list)
    close: int | str = "open"
    sent_session: str | None = None

    @property
    def types(self) -> list[str]:
        collapsed: list[str] = []
        for frame in self.frames:
            if not (frame["type"] == "entries" and collapsed and collapsed[-1] == "entries"):
                collapsed.append(frame["type"])
        return collapsed

    @property
    def seqs(self) -> list[int]:
        return [entry["seq"] for frame in self.frames if frame["type"] == "entries" for entry in frame["entries"]]


class Table:
    """The gateway and the streams every case starts from."""

    def __init__(self, redis: redis_lib.Redis, gateway: GatewayProcess) -> None:
        self.redis = redis
        self.gateway = gateway
        self.issued: dict[str, str] = {}

    def token(self, stream: str, kind: str = "valid", subject: str = SUBJECT) -> str | None:
        now = int(time.time())
        return {
            "valid": lambda: issue_token(SECRET, [stream], 300, subject=subject, now=now),
            "expired": lambda: issue_token(SECRET, [stream], 60, subject=subject, now=now - 3600),
            "forged": lambda: issue_token("a-different-secret-of-enough-bytes!!", [stream], 300, now=now),
            "other-stream": lambda: issue_token(SECRET, ["some-other-stream"], 300, now=now),
            # Signed with the right secret, but a claim of the wrong type (issue 39: accepted before).
            "string-exp": lambda: jwt.encode({"sub": subject, "streams": [stream], "exp": str(now + 300)}, SECRET,
                                             algorithm=ALGORITHM),
            "streams-not-strings": lambda: jwt.encode({"sub": subject, "streams": [stream, 7], "exp": now + 300},
                                                      SECRET, algorithm=ALGORITHM),
            # A scope claim (issue 43): the rows whose n is at least 2, on every stream.
            "scoped": lambda: issue_token(SECRET, [stream], 300, subject=subject, now=now,
                                          scope={"*": parse_filter({"n": {"ge": 2}})}),
            "none": lambda: None,
        }[kind]()

    def resolve(self, value: Any, stream: str, conversation: Conversation) -> Any:
        if isinstance(value, dict):
            return {k: self.resolve(v, stream, conversation) for k, v in value.items()}
        if not (isinstance(value, str) and value.startswith("$")):
            return value
        meta = ReplayLogReader(self.redis, stream).meta()
        if value == "$epoch":
            return meta.epoch
        if value.startswith("$head"):
            return meta.last_seq + int(value.removeprefix("$head") or 0)
        if value == "$ack_beyond":
            return max(conversation.seqs, default=0) + 1
        if value in ("$issued", "$issued-other-subject"):
            return self.issued[stream]
        if value.startswith("$digest@"):
            [entry] = ReplayLogReader(self.redis, stream).read_after(int(value.removeprefix("$digest@")) - 1, 1)
            return entry.digest
        if value == "$foreign":
            return "never-issued-by-any-pod"
        raise ValueError(f"unknown placeholder {value}")

    def frame(self, item: Any, stream: str, conversation: Conversation) -> str | bytes:
        if item == "$binary":
            return b"\x00\x01binary"
        if item in ("$big8k", "$big64k"):
            return json.dumps({"type": "hello", "v": 1, "token": "x" * (9_000 if item == "$big8k" else 70_000)})
        if isinstance(item, str):
            return item
        [(frame_type, fields)] = item.items()
        fields = self.resolve(dict(fields), stream, conversation)
        if frame_type != "hello":
            return json.dumps({"type": frame_type, **fields})
        token_kind = fields.pop("token", "valid")
        session = fields.get("session")
        subject = "someone-else" if item["hello"].get("session") == "$issued-other-subject" else SUBJECT
        token = self.token(stream, token_kind, subject)
        conversation.sent_session = session
        return json.dumps({"type": "hello", "v": 1, **fields, **({"token": token} if token else {})})

    async def converse(self, case: dict[str, Any]) -> Conversation:
        stream = stream_of(case)
        conversation = Conversation()
        origin = case.get("origin", ALLOWED_ORIGIN)
        ws = await connect(self.gateway.ws(stream), open_timeout=5, max_size=None,
                           origin=None if origin == "none" else Origin(origin))
        try:
            for item in case["send"]:
                try:
                    await ws.send(self.frame(item, stream, conversation))
                except ConnectionClosed:
                    break  # refused at once (a bad origin, an unserved stream): read what it said
                await self._read(ws, conversation, case.get("settle_s", QUIET_S))
            if not case["send"]:  # only the hello timeout can end this one
                await self._read(ws, conversation, 5.0)
            await self._read(ws, conversation, QUIET_S)
        except ConnectionClosed as closed:
            conversation.close = closed.rcvd.code if closed.rcvd else 1006
        finally:
            await ws.close()
        return conversation

    async def converse_sse(self, case: dict[str, Any]) -> Conversation:
        """The case over SSE: its first frame as the ``POST /sse`` body, the others posted to the connection."""
        stream = stream_of(case)
        conversation = Conversation()
        origin = case.get("origin", ALLOWED_ORIGIN)
        first, *rest = case["send"]
        hello = self.frame(first, stream, conversation)
        hello_text = hello if isinstance(hello, str) else hello.decode("utf-8", "replace")
        async with sse_connection(self.gateway.http, stream, hello_text,
                                  headers={} if origin == "none" else {"origin": origin}) as (sse, task):
            await self._quiet(sse, task, case.get("settle_s", QUIET_S))
            for item in rest:
                if task.done():
                    break
                conversation.frames = list(sse.frames)  # for $ack_beyond: the seqs sent so far
                await sse.post(self.frame(item, stream, conversation))
                await self._quiet(sse, task, QUIET_S)
            await self._quiet(sse, task, QUIET_S)
            conversation.frames = list(sse.frames)
            conversation.close = sse.close["code"] if sse.close else ("open" if not task.done() else 1006)
        return conversation

    @staticmethod
    async def _quiet(sse: SseConversation, task: asyncio.Task[None], quiet_s: float) -> None:
        """Until the response ended or no frame came for ``quiet_s`` since the last one (as ``_read``: a
        window counted from the last frame, not from the round's start, which could stretch twice as long)."""
        loop = asyncio.get_running_loop()
        seen, since = len(sse.frames), loop.time()
        while not task.done() and loop.time() - since < quiet_s:
            await asyncio.wait([task], timeout=0.05)
            if len(sse.frames) != seen:
                seen, since = len(sse.frames), loop.time()

    @staticmethod
    async def _read(ws: ClientConnection, conversation: Conversation, quiet_s: float) -> None:
        while True:
            try:
                async with asyncio.timeout(quiet_s):
                    message = await ws.recv()
            except TimeoutError:
                return
            conversation.frames.append(json.loads(message))

    def issue_session(self, stream: str, ack: int) -> None:
        """A session a pod issued to SUBJECT for ``stream``, its last ack at ``ack``."""
        async def visit() -> str:
            async with connect(self.gateway.ws(stream), origin=Origin(ALLOWED_ORIGIN), open_timeout=5) as ws:
                await ws.send(json.dumps({"type": "hello", "v": 1, "cursor": {"epoch": "", "seq": 0},
                                          "token": self.token(stream)}))
                conversation = Conversation()
                await self._read(ws, conversation, QUIET_S)
                await ws.send(json.dumps({"type": "ack", "seq": ack, "duplicates": 0, "gaps": 0}))
                await asyncio.sleep(0.1)
                return str(conversation.frames[0]["session"])

        self.issued[stream] = asyncio.run(visit())


@pytest.fixture(scope="module")
def table(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Table]:
    redis = redis_server.client(decode_responses=False)
    served = sorted({stream_of(case) for case in SERVER_CASES.values()} - {"not-served-here"})
    for case in SERVER_CASES.values():
        spec = case.get("stream", {})
        redis.delete(*[f"sparkwire:{{{stream_of(case)}}}:{key}" for key in ("log", "meta", "state", "ids")])
        if spec.get("entries"):
            Committer(redis, stream_of(case), per_batch=1, retention=spec.get("retention", 100_000)).commit(
                spec["entries"])
    gateway = GatewayProcess(tmp_path_factory.mktemp("conformance"), redis_server.url, served,
                             "--allowed-origins", ALLOWED_ORIGIN, "--hello-timeout-ms", "1000",
                             "--ping-interval-ms", str(SERVER_PING_INTERVAL_MS),
                             auth_secret=SECRET).start()
    try:
        yield Table(redis, gateway)
    finally:
        gateway.stop()
        redis.close()


# Every case over both transports but where the table says one does not apply (`sse: {n/a: why}`).
RUNS = [(case_id, transport) for case_id, case in SERVER_CASES.items() for transport in ("websocket", "sse")
        if not (transport == "sse" and "n/a" in case.get("sse", {}))]


@pytest.mark.parametrize(("case_id", "transport"), RUNS, ids=[f"{case}-{transport}" for case, transport in RUNS])
def test_server_case(table: Table, case_id: str, transport: str) -> None:
    case = SERVER_CASES[case_id]
    expect = case["expect"] if transport == "websocket" else case.get("sse", {}).get("expect", case["expect"])
    if "issued_ack" in case:
        table.issue_session(stream_of(case), case["issued_ack"])
    got = asyncio.run(table.converse(case) if transport == "websocket" else table.converse_sse(case))
    where = f"{case_id} ({case['rule']}): got frames {got.types}, close {got.close}"
    assert got.types == expect["frames"], where
    assert got.close == expect["close"], where
    errors = [frame for frame in got.frames if frame["type"] == "error"]
    if expect.get("error"):
        assert got.frames[-1]["type"] == "error" and got.frames[-1]["code"] == got.close, where
    else:
        assert not errors, where
    if "welcome" in expect:
        welcome = got.frames[0]
        for name, value in expect["welcome"].items():
            if name == "session":
                assert (welcome["session"] == got.sent_session) == (value == "same"), where
            else:
                assert welcome[name] == value, f"{where}: welcome.{name} {welcome[name]!r}"
    if "seqs" in expect:
        first, last = (int(n) for n in str(expect["seqs"]).split(".."))
        assert got.seqs == list(range(first, last + 1)), where
    if "snapshot_seq" in expect:
        assert [f["seq"] for f in got.frames if f["type"] == "snapshot"][-1] == expect["snapshot_seq"], where
    if "pong_t" in expect:
        assert [f["t"] for f in got.frames if f["type"] == "pong"] == [expect["pong_t"]], where
