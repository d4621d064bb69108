"""``GET /history`` on a real gateway process: the last N entries (default 2000, capped at 10000) and the state
they end at, read consistently while entries are committed, so a client resuming with ``{epoch, seq}`` gets
exactly what follows; the bearer-token rule of ``/snapshot``; 400, 404 and 503."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib

from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.protocol.limits import DEFAULT_HISTORY_ENTRIES, MAX_HISTORY_ENTRIES
from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

from .conftest import SECRET
from .raw_client import Received, collect, open_session


def get(url: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return int(error.code), json.loads(error.read() or b"null")


def fill(redis: redis_lib.Redis, stream: str, records: int, *, per_batch: int = 500) -> None:
    writer = ReplayLogWriter(redis, stream, retention=100_000)
    for batch, first in enumerate(range(0, records, per_batch)):
        writer.commit_batch("fill", batch, [Record(f"pid-{n:06d}", f"k{n % 9}", json.dumps({"n": n}))
                                            for n in range(first, min(first + per_batch, records))])


def test_history_is_the_last_n_entries_and_the_state_bounded(gateway: GatewayProcess, redis: redis_lib.Redis,
                                                             unique_name: str) -> None:
    url = f"{gateway.http}/history?stream={unique_name}"
    status, empty = get(url)
    assert (status, empty) == (200, {"epoch": "", "seq": 0, "firstSeq": 1, "last": DEFAULT_HISTORY_ENTRIES,
                                     "entries": [], "items": {}})

    fill(redis, unique_name, MAX_HISTORY_ENTRIES + 700)
    head = MAX_HISTORY_ENTRIES + 700
    epoch = ReplayLogReader(redis, unique_name).meta().epoch

    status, fifty = get(f"{url}&last=50")
    assert status == 200
    assert (fifty["epoch"], fifty["seq"], fifty["firstSeq"], fifty["last"]) == (epoch, head, 1, 50)
    assert [e["seq"] for e in fifty["entries"]] == list(range(head - 49, head + 1))
    first = fifty["entries"][0]
    assert (first["processingId"], first["key"], first["data"]) == (f"pid-{head - 50:06d}", f"k{(head - 50) % 9}",
                                                                    {"n": head - 50})
    assert isinstance(first["commitMs"], int)
    # The latest result of every key, the same as /snapshot's at the same seq.
    status, snapshot = get(f"{gateway.http}/snapshot?stream={unique_name}")
    assert (snapshot["seq"], fifty["items"]) == (head, snapshot["items"])
    assert sorted(fifty["items"]) == [f"k{i}" for i in range(9)]

    status, default = get(url)
    assert (status, len(default["entries"]), default["entries"][0]["seq"]) == (
        200, DEFAULT_HISTORY_ENTRIES, head - DEFAULT_HISTORY_ENTRIES + 1)
    status, capped = get(f"{url}&last=1000000")
    assert (status, capped["last"], len(capped["entries"])) == (200, MAX_HISTORY_ENTRIES, MAX_HISTORY_ENTRIES)
    assert capped["entries"][-1]["seq"] == head
    status, none = get(f"{url}&last=0")
    assert (status, none["entries"], none["seq"], len(none["items"])) == (200, [], head, 9)


def test_a_client_resuming_after_a_history_gets_exactly_what_follows(
    gateway: GatewayProcess, redis: redis_lib.Redis, committer: Committer, unique_name: str,
) -> None:
    """Reads while a committer appends every 20 ms: each history is whole (consecutive entries ending at its
    seq, the state as of that seq), and a hello with its {epoch, seq} gets the entries from seq + 1, none
    missing or repeated."""
    committer.interval = 0.02
    committer.commit(20)
    committer.start()
    resumed: list[tuple[int, Received]] = []
    seen_seqs: set[int] = set()
    for _ in range(15):
        status, doc = get(f"{gateway.http}/history?stream={unique_name}&last=60")
        assert status == 200
        seqs = [e["seq"] for e in doc["entries"]]
        assert seqs == list(range(doc["seq"] - 59, doc["seq"] + 1)), seqs
        latest = {e["key"]: e for e in doc["entries"]}
        assert {k: v["seq"] for k, v in doc["items"].items()} == {k: e["seq"] for k, e in latest.items()}
        seen_seqs.add(doc["seq"])

        async def resume(doc: dict[str, Any] = doc) -> Received:
            ws = await open_session(gateway.ws(unique_name), {"cursor": {"epoch": doc["epoch"], "seq": doc["seq"]}})
            async with ws:
                return await collect(ws, Received(), until_seq=doc["seq"] + 30)

        resumed.append((doc["seq"], asyncio.run(resume())))
        time.sleep(0.03)
    committer.stop()
    assert len(seen_seqs) > 5, "the reads did not interleave with the commits"
    for seq, received in resumed:
        assert received.welcome is not None and received.welcome["recovered"] is True, received
        assert received.snapshot_seq is None
        assert received.seqs[:30] == list(range(seq + 1, seq + 31)), (seq, received.seqs[:5])


@pytest.fixture
def secured(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name, f"{unique_name}-other"],
                             auth_secret=SECRET).start()
    yield process
    process.stop()


def test_history_needs_the_token_of_a_hello(secured: GatewayProcess, unique_name: str) -> None:
    url = f"{secured.http}/history?stream={unique_name}"
    now = int(time.time())
    assert get(url)[0] == 401
    assert get(url, "a.b.c")[0] == 401
    assert get(url, issue_token(SECRET, [unique_name], -60, now=now))[0] == 401  # expired
    assert get(url, issue_token(SECRET, [f"{unique_name}-other"], 60, now=now))[0] == 403
    assert get(url, issue_token(SECRET, [unique_name], 60, now=now))[0] == 200
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {issue_token(SECRET, ['*'], 60, now=now)}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 401


def test_bad_last_unknown_stream_and_redis_down(unique_name: str, tmp_path: Path) -> None:
    with RedisServer(tmp_path / "redis") as own_redis:
        process = GatewayProcess(tmp_path, own_redis.url, [unique_name]).start()
        try:
            url = f"{process.http}/history?stream={unique_name}"
            for bad in ("-1", "abc", "1.5", "", "+5", "1e3", "9" * 19):
                status, body = get(f"{url}&last={urllib.request.quote(bad)}")
                assert (status, "last must be" in body["error"]) == (400, True), bad
            assert get(f"{process.http}/history?stream=nope")[0] == 404
            assert get(f"{process.http}/history")[0] == 404
            own_redis.stop()
            status, body = get(url)
            assert (status, body) == (503, {"error": "redis unavailable"})
        finally:
            process.stop()
