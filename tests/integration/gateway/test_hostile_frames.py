"""Property-based abuse of a live gateway: whatever a client sends — malformed, oversized or out-of-order
frames, bogus cursors and epochs — it gets a documented close code (with an error frame when the code is
terminal) or normal service, never an internal error; and a well-behaved client reading meanwhile misses
nothing and sees nothing twice."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis as redis_lib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from sparkwire.client import BackgroundClient
from sparkwire.protocol.close_codes import CLOSE_SPECS, CloseCode
from sparkwire.protocol.limits import MAX_CLIENT_FRAME_BYTES
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer, http_status

DOCUMENTED = {int(code) for code in CLOSE_SPECS}
# How long an example listens after its last frame: long enough for the server's verdict on a bad frame.
LISTEN_S = 0.3

ints = st.one_of(st.integers(-2, 3), st.integers(min_value=-(2**70), max_value=2**70))
epochs = st.one_of(st.text(max_size=80), st.integers(), st.none(), st.sampled_from(["", "live-epoch"]))
json_values = st.recursive(st.none() | st.booleans() | ints | st.floats(allow_nan=False) | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4),
                           max_leaves=10)
cursors = st.one_of(st.none(), json_values, st.fixed_dictionaries({"epoch": epochs, "seq": ints}),
                    st.fixed_dictionaries({"epoch": epochs, "seq": ints}, optional={"extra": json_values}))
hellos = st.fixed_dictionaries(
    {"type": st.just("hello"), "v": st.one_of(st.just(1), ints)},
    optional={"session": st.one_of(st.none(), st.text(max_size=140), ints), "cursor": cursors,
              "token": st.one_of(st.none(), st.text(max_size=30)), "extra": json_values},
)
acks = st.fixed_dictionaries({"type": st.just("ack"), "seq": ints, "duplicates": ints, "gaps": ints},
                             optional={"extra": json_values})
heartbeats = st.fixed_dictionaries({"type": st.sampled_from(["ping", "pong"]), "t": st.one_of(ints, json_values)})
objects = st.one_of(hellos, acks, heartbeats, st.dictionaries(st.text(max_size=10), json_values, max_size=5))
frames = st.one_of(
    objects.map(json.dumps),
    st.text(max_size=200),
    st.binary(max_size=64),
    st.integers(MAX_CLIENT_FRAME_BYTES - 64, MAX_CLIENT_FRAME_BYTES * 2).map(
        lambda n: json.dumps({"type": "hello", "v": 1, "token": "x" * n})),
)
# Mostly a hello first (so what follows reaches the connected state), sometimes anything first.
conversations = st.one_of(
    st.tuples(hellos.map(json.dumps), st.lists(frames, max_size=3)).map(lambda t: [t[0], *t[1]]),
    st.lists(frames, min_size=1, max_size=4),
)


class LiveStack:
    def __init__(self, redis: redis_lib.Redis, gateway: GatewayProcess, stream: str) -> None:
        self.redis = redis
        self.gateway = gateway
        self.stream = stream
        self.codes: dict[int | None, int] = {}


@pytest.fixture(scope="module")
def live(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    stream = f"hostile{time.monotonic_ns() % 10**9}"
    gateway = GatewayProcess(tmp_path_factory.mktemp("hostile"), redis_server.url, [stream],
                             "--hello-timeout-ms", "2000").start()
    client = redis_server.client(decode_responses=False)
    try:
        yield LiveStack(client, gateway, stream)
    finally:
        gateway.stop()
        client.close()


def converse(url: str, conversation: list[str | bytes]) -> tuple[int | None, list[dict[str, Any]]]:
    """Send the frames; return the close code (None: still open when we left) and the frames received."""
    received: list[dict[str, Any]] = []
    with connect(url, open_timeout=5, max_size=None) as ws:
        try:
            for frame in conversation:
                ws.send(frame)
        except ConnectionClosed:
            pass  # the server answered an earlier frame; what it sent before closing is still readable
        deadline = time.monotonic() + LISTEN_S
        try:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    received.append(json.loads(ws.recv(timeout=left)))
                except TimeoutError:
                    break
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else None), received
    return None, received


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(conversation=conversations)
def test_any_frames_get_a_documented_answer(live: LiveStack, conversation: list[str | bytes]) -> None:
    code, received = converse(live.gateway.ws(live.stream), conversation)
    live.codes[code] = live.codes.get(code, 0) + 1
    assert code is None or code in DOCUMENTED, f"undocumented close {code}"
    assert code != CloseCode.INTERNAL_ERROR, received
    errors = [frame for frame in received if frame.get("type") == "error"]
    # Application codes (4xxx) that end the session come with an error frame holding the full reason;
    # WebSocket-level ones (1003 binary, 1009 too big) may be sent by the server's WebSocket layer itself.
    if code is not None and code >= 4000 and not CloseCode(code).resumable:
        assert errors and errors[-1]["code"] == code, f"terminal {code} without its error frame: {received}"


@pytest.fixture(scope="module")
def watched(live: LiveStack) -> Iterator[tuple[LiveStack, BackgroundClient, Committer]]:
    """Entries committed all through the module, and a well-behaved client reading them meanwhile."""
    committer = Committer(live.redis, live.stream, per_batch=3, interval=0.05).start()
    watcher = BackgroundClient(live.gateway.ws(live.stream), keep_applied=True).start()
    try:
        yield live, watcher, committer
    finally:
        committer.stop()
        watcher.stop()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(conversation=conversations)
def test_abuse_does_not_reach_a_well_behaved_client(
    watched: tuple[LiveStack, BackgroundClient, Committer], conversation: list[str | bytes]
) -> None:
    live, _, _ = watched
    code, _ = converse(live.gateway.ws(live.stream), conversation)
    assert code != CloseCode.INTERNAL_ERROR


def test_after_the_abuse_the_pod_is_ready_and_the_watcher_has_every_entry_once(
    watched: tuple[LiveStack, BackgroundClient, Committer],
) -> None:
    live, watcher, committer = watched
    committer.stop()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and watcher.last_seq < committer.committed:
        time.sleep(0.1)
    assert http_status(f"{live.gateway.http}/readyz") == 200
    stats = watcher.client.stats()
    assert (stats.duplicates, stats.gaps, stats.reconnects) == (0, 0, 0), stats
    expected = [(e.seq, e.processing_id) for e in ReplayLogReader(live.redis, live.stream).iter_all()]
    applied = watcher.client.applied
    assert applied and applied == expected[len(expected) - len(applied):]
    assert applied[-1][0] == committer.committed
    assert "Traceback" not in live.gateway.process.log_tail(10_000)
