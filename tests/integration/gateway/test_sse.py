"""The Server-Sent Events transport against a real gateway process (uvicorn) and Redis, entries committed by
the real commit script: the same frames, resume, acks and closes as over a WebSocket."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx2
import redis as redis_lib

from sparkwire.replaylog import ReplayLogReader

from .conftest import Committer, GatewayProcess, wait_for
from .sse_client import SseConversation, sse_connection, until


def snapshot_done(conversation: SseConversation) -> bool:
    return any(frame["type"] == "snapshot" and not frame.get("more") for frame in conversation.frames)


def closes(gateway: GatewayProcess, code: int, default: float | None = None) -> float:
    return gateway.metric(f'sparkwire_gateway_closes_total{{code="{code}"}}', default=default)


def no_connections(gateway: GatewayProcess) -> None:
    wait_for(lambda: gateway.metric("sparkwire_gateway_connections") == 0, timeout=10)


def test_a_snapshot_then_live_once_each_and_the_acked_session_resumes_on_a_new_connection(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(10)  # entries 1..50

    async def run() -> tuple[SseConversation, SseConversation]:
        async with sse_connection(gateway.http, unique_name, {}) as (first, task):
            await until(lambda: snapshot_done(first), task)
            committer.commit(4)  # 51..70, live
            await until(lambda: bool(first.seqs) and first.seqs[-1] >= 70, task)
            assert await first.post({"type": "ack", "seq": 70, "duplicates": 0, "gaps": 0}) == 204
        await asyncio.to_thread(no_connections, gateway)  # its last ack flushed as it ended
        committer.commit(2)  # 71..80, while no connection is open
        session = first.frames[0]["session"]
        async with sse_connection(gateway.http, unique_name, {"session": session}) as (again, task):
            await until(lambda: bool(again.seqs) and again.seqs[-1] >= 80, task)
        return first, again

    first, again = asyncio.run(run())
    assert first.frames[0]["type"] == "welcome" and first.frames[0]["reset"] == "no_position"
    assert [frame["seq"] for frame in first.frames if frame["type"] == "snapshot"][-1] == 50
    assert first.seqs == list(range(51, 71))
    assert again.frames[0]["recovered"] is True and again.seqs == list(range(71, 81))
    assert not [frame for frame in again.frames if frame["type"] == "snapshot"]


def test_a_cursor_resumes_with_every_later_entry_once_across_the_replay_live_junction(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    committer.commit(40)  # 200 entries of history
    epoch = ReplayLogReader(redis, unique_name).meta().epoch
    committer.start()  # and live ones while the client catches up

    async def run() -> list[int]:
        async with sse_connection(gateway.http, unique_name, {"cursor": {"epoch": epoch, "seq": 37}}) as (conv, task):
            await until(lambda: bool(conv.seqs) and conv.seqs[-1] >= 400, task, timeout=30)
            return conv.seqs

    seqs = asyncio.run(run())
    committer.stop()
    assert seqs[: 400 - 37] == list(range(38, 401))


def test_pings_posted_are_answered_and_a_bad_frame_ends_the_response_with_its_close(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(1)

    async def run() -> SseConversation:
        async with sse_connection(gateway.http, unique_name, {}) as (conv, task):
            await until(lambda: snapshot_done(conv), task)
            assert await conv.post({"type": "ping", "t": 7}) == 204
            await until(lambda: {"type": "pong", "t": 7} in conv.frames, task)
            assert await conv.post({"type": "ack", "seq": 99, "duplicates": 0, "gaps": 0}) == 204  # beyond 5
            await until(lambda: conv.close is not None, task)
            await asyncio.wait_for(task, 5)  # and the response ended
            assert await conv.post({"type": "ping", "t": 8}) == 404  # the connection is gone
            return conv

    conv = asyncio.run(run())
    assert conv.close is not None and conv.close["code"] == 4400
    assert conv.frames[-1]["type"] == "error" and "ack of seq 99" in conv.frames[-1]["reason"]
    no_connections(gateway)


def test_what_the_pod_refuses_is_a_close_event_and_frames_for_no_connection_a_404(
    gateway: GatewayProcess, unique_name: str
) -> None:
    async def run() -> tuple[dict[str, Any] | None, dict[str, Any] | None, int]:
        async with sse_connection(gateway.http, "not-served-here", {}) as (unknown, task):
            await asyncio.wait_for(task, 5)
        async with sse_connection(gateway.http, unique_name, "{not json") as (bad_hello, task):
            await asyncio.wait_for(task, 5)
        async with httpx2.AsyncClient() as http:
            lost = await http.post(f"{gateway.http}/sse/frames", params={"connection": "0" * 32}, content="{}")
        return unknown.close, bad_hello.close, lost.status_code

    refused_before = closes(gateway, 4404, default=0)  # none yet on a fresh gateway: no sample for the code
    unknown, bad_hello, lost = asyncio.run(run())
    assert unknown == {"code": 4404, "reason": "stream 'not-served-here' is not served here"}
    assert closes(gateway, 4404) == refused_before + 1, "a refusal is counted as over a WebSocket"
    assert bad_hello is not None and bad_hello["code"] == 4400
    assert lost == 404


def test_a_client_that_leaves_ends_its_connection_on_the_pod(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(2)

    async def run() -> None:
        for _ in range(5):
            async with sse_connection(gateway.http, unique_name, {}) as (conv, task):
                await until(lambda: snapshot_done(conv), task)
                assert gateway.metric("sparkwire_gateway_connections") >= 1

    asyncio.run(run())
    no_connections(gateway)
    accepted = f'sparkwire_gateway_accepted_connections_total{{stream="{unique_name}",transport="sse"}}'
    assert gateway.metric(accepted) == 5
    closes = {line for line in gateway.metrics_text().splitlines() if line.startswith("sparkwire_gateway_closes")}
    assert not [line for line in closes if json.dumps("4400") in line and not line.endswith(" 0.0")], closes


def test_a_draining_pod_closes_its_event_streams_with_going_away_and_exits_without_waiting(
    gateway: GatewayProcess, committer: Committer, unique_name: str
) -> None:
    committer.commit(1)

    async def run() -> tuple[SseConversation, float]:
        async with sse_connection(gateway.http, unique_name, {}) as (conv, task):
            await until(lambda: snapshot_done(conv), task)
            started = time.monotonic()
            await asyncio.to_thread(gateway.stop)  # SIGTERM: the pod drains
            stopped = time.monotonic() - started
            await until(lambda: conv.close is not None, task)
            return conv, stopped

    conv, stopped = asyncio.run(run())
    assert conv.close == {"code": 1001, "reason": "pod draining"}
    assert stopped < 3, "shutdown waited for an event stream the drain should have ended"
    assert "timeout graceful shutdown exceeded" not in gateway.process.log_path.read_text()


def test_a_page_of_another_origin_gets_its_preflight_answered_and_the_connection_header_exposed(
    gateway: GatewayProcess, unique_name: str
) -> None:
    page = "https://app.example"

    async def run() -> tuple[httpx2.Response, httpx2.Response, httpx2.Response]:
        async with httpx2.AsyncClient(trust_env=False) as http:
            preflight = await http.options(f"{gateway.http}/sse", params={"stream": unique_name}, headers={
                "origin": page, "access-control-request-method": "POST",
                "access-control-request-headers": "content-type,x-sparkwire-affinity"})
            async with http.stream("POST", f"{gateway.http}/sse", params={"stream": "not-served-here"},
                                   content='{"type":"hello","v":1}', headers={"origin": page}) as answer:
                await answer.aread()
            stray = await http.options(f"{gateway.http}/sse/frames", params={"connection": "x"})
        return preflight, answer, stray

    preflight, answer, stray = asyncio.run(run())
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] in ("*", page)
    assert "x-sparkwire-affinity" in preflight.headers["access-control-allow-headers"].lower()
    assert "x-sparkwire-connection" in answer.headers["access-control-expose-headers"].lower()
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert stray.status_code == 405  # an OPTIONS that is no preflight opens nothing
