"""One real gateway process, real Redis, entries committed by the real commit script meanwhile."""

from __future__ import annotations

import asyncio
import json

import redis as redis_lib

from sparkwire.gateway.connection.handshake import CURSOR_AHEAD_WAIT_S
from sparkwire.replaylog import ReplayLogReader

from .conftest import Committer, GatewayProcess
from .raw_client import Received, closed_with, collect, open_session


def test_a_cursor_resumes_with_every_later_entry_once_across_the_replay_live_junction(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    committer.commit(40)  # 200 entries of history
    epoch = ReplayLogReader(redis, unique_name).meta().epoch
    committer.start()  # and live ones while the client catches up

    async def run() -> Received:
        ws = await open_session(gateway.ws(unique_name), {"cursor": {"epoch": epoch, "seq": 37}})
        received = await collect(ws, Received(), until_seq=400, timeout=30)
        await ws.close()
        return received

    received = asyncio.run(run())
    assert received.welcome is not None and received.welcome["recovered"] is True
    assert received.seqs[: 400 - 37] == list(range(38, 401))


def test_no_position_gets_a_snapshot_then_live(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(10)

    async def run() -> Received:
        ws = await open_session(gateway.ws(unique_name), {})
        received = Received()
        await collect(ws, received, until_seq=0, timeout=2)  # welcome + snapshot, no entries yet
        committer.commit(2)
        await collect(ws, received, until_seq=60, timeout=10)
        await ws.close()
        return received

    received = asyncio.run(run())
    assert received.welcome is not None and received.welcome["reset"] == "no_position"
    assert received.snapshot_seq == 50
    assert received.seqs == list(range(51, 61))
    assert gateway.metric('sparkwire_gateway_resets_total{reason="no_position"}') >= 1


def test_a_cursor_from_another_epoch_or_beyond_the_head_is_reset_by_snapshot(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    committer.commit(4)
    epoch = ReplayLogReader(redis, unique_name).meta().epoch

    async def start(cursor: dict[str, object]) -> Received:
        ws = await open_session(gateway.ws(unique_name), {"cursor": cursor})
        # a cursor ahead in the stream's own epoch is first waited for (CURSOR_AHEAD_WAIT_S)
        received = await collect(ws, Received(), until_seq=20, timeout=CURSOR_AHEAD_WAIT_S + 4)
        await ws.close()
        return received

    for cursor, reason in (({"epoch": "another", "seq": 5}, "epoch_mismatch"),
                           ({"epoch": epoch, "seq": 999}, "cursor_ahead")):
        received = asyncio.run(start(cursor))
        assert received.welcome is not None and received.welcome["reset"] == reason
        assert received.snapshot_seq == 20 and received.seqs == []
    # seq 0 means "applied nothing": a full replay, in any epoch
    fresh = asyncio.run(start({"epoch": "x", "seq": 0}))
    assert fresh.snapshot_seq is None and fresh.seqs == list(range(1, 21))


def test_a_cursor_a_little_ahead_of_the_log_is_waited_for_and_resumed_not_snapshotted(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    """A Redis failover's case: the client read seqs 21-25 through a pod on the new primary, and reconnects to
    a pod whose log still ends at 20 (it moves a poll later, or the writer publishes those entries again a
    moment later). A snapshot would skip 21-25 on the client's screen for good; the pod waits for them."""
    committer.commit(4)  # seqs 1..20
    epoch = ReplayLogReader(redis, unique_name).meta().epoch

    async def run() -> Received:
        ws = await open_session(gateway.ws(unique_name), {"cursor": {"epoch": epoch, "seq": 25}})
        await asyncio.sleep(1.0)
        await asyncio.to_thread(committer.commit, 2)  # seqs 21..30 reach this pod's log
        received = await collect(ws, Received(), until_seq=30, timeout=CURSOR_AHEAD_WAIT_S + 4)
        await ws.close()
        return received

    received = asyncio.run(run())
    assert received.welcome is not None and received.welcome["reset"] is None and received.welcome["recovered"]
    assert received.snapshot_seq is None and received.seqs == list(range(26, 31))


def test_bad_frames_get_clear_errors_and_the_pod_keeps_serving(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    url = gateway.ws(unique_name)
    bad = {
        "not json": (["{nope"], 4400),
        "binary": ([b"\x00\x01"], 1003),
        "ack before hello": ([json.dumps({"type": "ack", "seq": 1, "duplicates": 0, "gaps": 0})], 4400),
        "bogus cursor": ([json.dumps({"type": "hello", "v": 1, "cursor": {"epoch": 5, "seq": -1}})], 4400),
        "wrong version": ([json.dumps({"type": "hello", "v": 99})], 4426),
        "oversized": (["x" * 20_000], 1009),
    }
    for name, (frames, code) in bad.items():
        got, texts = asyncio.run(closed_with(url, list(frames)))
        assert got == code, f"{name}: closed with {got}, frames {texts}"
        if code >= 4000:
            assert json.loads(texts[-1])["type"] == "error", name
    # an unknown stream is refused with its own code
    got, _ = asyncio.run(closed_with(gateway.ws("not-served"), [json.dumps({"type": "hello", "v": 1})]))
    assert got == 4404
    # and a well-behaved client still gets everything
    committer.commit(3)

    async def good() -> Received:
        ws = await open_session(url, {"cursor": {"epoch": "", "seq": 0}})
        received = await collect(ws, Received(), until_seq=15, timeout=10)
        await ws.close()
        return received

    assert asyncio.run(good()).seqs == list(range(1, 16))


def test_acks_are_stored_in_the_session_and_a_cursorless_reconnect_resumes_there(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(6)  # seqs 1..30

    async def run() -> tuple[Received, Received]:
        ws = await open_session(gateway.ws(unique_name), {"cursor": {"epoch": "", "seq": 0}})
        first = await collect(ws, Received(), until_seq=30)
        await ws.send(json.dumps({"type": "ack", "seq": 20, "duplicates": 0, "gaps": 0}))
        await asyncio.sleep(0.3)
        await ws.close()
        assert first.welcome is not None
        ws = await open_session(gateway.ws(unique_name), {"session": first.welcome["session"]})
        second = await collect(ws, Received(), until_seq=30)
        await ws.close()
        return first, second

    first, second = asyncio.run(run())
    assert first.seqs == list(range(1, 31))
    assert second.welcome is not None and second.welcome["recovered"] is True
    assert second.welcome["session"] == first.welcome["session"]  # issued by a pod: kept
    assert second.seqs == list(range(21, 31))


def test_entries_carry_the_epoch_created_after_the_client_connected_to_an_empty_stream(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    async def run() -> list[str]:
        ws = await open_session(gateway.ws(unique_name), {})
        await collect(ws, Received(), until_seq=0, timeout=1)  # welcome + empty snapshot, epoch ""
        committer.commit(2)
        epochs = []
        while len(epochs) < 1:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
            if frame["type"] == "entries":
                epochs.append(frame["epoch"])
        await ws.close()
        return epochs

    assert asyncio.run(run()) == [ReplayLogReader(redis, unique_name).meta().epoch]
