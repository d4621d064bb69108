"""StreamClient against a scripted in-process WebSocket server on loopback: resume with the cursor,
gap recovery, terminal closes, stop. (The real gateway is exercised by the integration tests.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from sparkwire.client import ReconnectPolicy, StreamClient, TerminalClose
from sparkwire.protocol.server_frames import Welcome, encode_entry, encode_snapshot, encode_welcome, pack_entries
from sparkwire.replaylog.model import Entry, Snapshot

FAST = ReconnectPolicy(initial_delay_s=0.01, max_delay_s=0.05)
Script = Callable[[ServerConnection, int, dict[str, object]], Awaitable[None]]


def welcome(recovered: bool, reset: str | None = None) -> str:
    return encode_welcome(Welcome(session="srv-session", epoch="e1", head_seq=0, recovered=recovered, reset=reset,
                                  ack_every=2, ack_interval_ms=50))


def entries(*seqs: int) -> str:
    items = [Entry(seq=s, processing_id=f"p{s}", key=f"k{s % 2}", data=f'{{"n":{s}}}', commit_ms=s, batch_id=0)
             for s in seqs]
    [frame] = pack_entries("e1", [encode_entry(item) for item in items])
    return frame


async def serve_script(script: Script, body: Callable[[str], Awaitable[None]],
                       received: list[dict[str, object]] | None = None) -> list[dict[str, object]]:
    """Serve ``script(connection, connection_number, hello)`` and run ``body(url)``; the frames the client sent,
    appended to ``received`` as they arrive (test_view_connection.py serves its filtered scripts with it too)."""
    received = [] if received is None else received
    connections = 0

    async def handler(ws: ServerConnection) -> None:
        nonlocal connections
        connections += 1
        hello = json.loads(await ws.recv())
        received.append(hello)

        async def record() -> None:  # until the connection closes
            with contextlib.suppress(ConnectionClosed):  # a close other than 1000 ends the iteration so
                async for message in ws:
                    received.append(json.loads(message))

        recorder = asyncio.create_task(record())
        await script(ws, connections, hello)
        await recorder

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        await asyncio.wait_for(body(f"ws://127.0.0.1:{port}/ws?stream=s"), 10)
    return received


async def run_against(script: Script, body: Callable[[StreamClient, list[dict[str, object]]], Awaitable[None]]) -> None:
    """Serve ``script(connection, connection_number, hello)`` and run ``body(client, received_frames)``."""
    received: list[dict[str, object]] = []

    async def with_client(url: str) -> None:
        await body(StreamClient(url, reconnect=FAST, keep_applied=True), received)

    await serve_script(script, with_client, received)


def test_resumes_after_a_resumable_close_with_session_and_cursor() -> None:
    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        if number == 1:
            assert "cursor" not in hello
            await ws.send(welcome(recovered=False, reset="no_position"))
            for part in encode_snapshot(Snapshot(epoch="e1", seq=0, items={})):
                await ws.send(part)
            await ws.send(entries(1, 2, 3))
            await ws.close(1011, "internal error")
        else:
            assert hello["session"] == "srv-session"
            assert {k: v for k, v in hello["cursor"].items() if k != "digest"} == {"epoch": "e1", "seq": 3}
            await ws.send(welcome(recovered=True))
            await ws.send(entries(3, 4, 5))  # a stale repeat of 3, then new entries
            await ws.send('{"type":"ping","t":9}')

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        runner = asyncio.create_task(client.run())
        await client.wait_until(lambda: client.stats().frames_received == 6, timeout=5)  # through the ping
        await client.stop()
        await runner
        assert [seq for seq, _ in client.applied] == [1, 2, 3, 4, 5]
        stats = client.stats()
        assert (stats.reconnects, stats.duplicates, stats.gaps, stats.terminal) == (1, 1, 0, None)
        assert stats.resets == {"no_position": 1} and stats.closes == {1011: 1}
        assert {"type": "pong", "t": 9} in received
        assert [f["seq"] for f in received if f["type"] == "ack"][-1] == 5

    asyncio.run(run_against(script, body))


def test_a_gap_closes_and_resumes_from_before_the_hole() -> None:
    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        await ws.send(welcome(recovered=number > 1))
        if number == 1:
            await ws.send(encode_snapshot(Snapshot(epoch="e1", seq=0, items={}))[0])
            await ws.send(entries(1, 2))
            await ws.send(entries(4))  # 3 is missing
        else:
            assert {k: v for k, v in hello["cursor"].items() if k != "digest"} == {"epoch": "e1", "seq": 2}
            await ws.send(entries(3, 4))

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        runner = asyncio.create_task(client.run())
        await client.wait_until(lambda: client.session.last_seq == 4, timeout=5)
        await client.stop()
        await runner
        assert [seq for seq, _ in client.applied] == [1, 2, 3, 4]
        assert client.stats().gaps == 1 and client.stats().reconnects == 1

    asyncio.run(run_against(script, body))


def test_a_terminal_close_ends_run_with_the_error_frames_full_reason() -> None:
    reason = "token expired " + "x" * 200  # longer than a close frame can carry

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        await ws.send(json.dumps({"type": "error", "code": 4401, "name": "auth_failed", "reason": reason}))
        await ws.close(4401, "authentication failed")

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        with pytest.raises(TerminalClose) as raised:
            await client.run()
        assert (raised.value.code, raised.value.reason) == (4401, reason)
        assert client.stats().terminal is raised.value and client.stats().reconnects == 0

    asyncio.run(run_against(script, body))


def test_connection_failures_are_retried_until_stopped() -> None:
    async def main() -> None:
        client = StreamClient("ws://127.0.0.1:9/ws?stream=s", reconnect=FAST)  # discard port: refused
        runner = asyncio.create_task(client.run())
        await asyncio.sleep(0.3)
        await client.stop()
        await asyncio.wait_for(runner, 2)
        assert client.stats().connection_failures >= 3

    asyncio.run(main())


def test_a_server_frame_the_client_cannot_read_is_terminal() -> None:
    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        await ws.send(welcome(recovered=True))
        await ws.send('{"type":"entries","epoch":"e1","entries":[{"seq":"one"}]}')

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        with pytest.raises(TerminalClose) as raised:
            await client.run()
        assert raised.value.code == 1002 and "entries[].seq" in raised.value.reason

    asyncio.run(run_against(script, body))


# -- async for entry in client -------------------------------------------------------------------------


def fresh_start() -> list[str]:
    return [welcome(recovered=False, reset="no_position"), *encode_snapshot(Snapshot(epoch="e1", seq=0, items={}))]


def test_async_for_runs_the_client_yields_each_entry_once_in_order_and_ends_when_it_stops() -> None:
    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        for frame in fresh_start():
            await ws.send(frame)
        await ws.send(entries(1, 2, 3))
        await ws.send(entries(3, 4))  # a repeat of 3: not yielded again
        await ws.send(entries(5, 6))

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        seqs: list[int] = []
        async for entry in client:  # no run(): iterating runs the client
            seqs.append(entry.seq)
            if entry.seq == 4:
                await client.stop()  # the entries already applied are still yielded, then the loop ends
        assert seqs[:4] == [1, 2, 3, 4] and seqs == list(range(1, len(seqs) + 1))
        assert client.stats().duplicates == 1 and client.stats().terminal is None
        assert [seq for seq, _ in client.recent] == seqs and client.applied_count == len(seqs)
        assert [f["seq"] for f in received if f["type"] == "ack"][-1] == seqs[-1]  # the final ack

    asyncio.run(run_against(script, body))


def test_breaking_out_of_the_iteration_stops_the_client_it_started() -> None:
    closed = asyncio.Event()

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        for frame in fresh_start():
            await ws.send(frame)
        await ws.send(entries(1, 2, 3))
        await ws.wait_closed()
        assert ws.close_code == 1000
        closed.set()

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        async with contextlib.aclosing(client.entries()) as stream:
            async for entry in stream:
                if entry.seq == 2:
                    break
        await asyncio.wait_for(closed.wait(), 5)  # closed normally once the iteration was closed
        await client.stop()  # returns at once: run() already returned

    asyncio.run(run_against(script, body))


def test_a_full_queue_stops_the_client_reading_until_entries_are_taken() -> None:
    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        for frame in fresh_start():
            await ws.send(frame)
        for seq in range(1, 11):
            await ws.send(entries(seq))

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        stream = client.entries(max_queued=3)
        first = await anext(stream)  # starts the client; the queue then fills up behind this entry
        await asyncio.sleep(0.3)
        assert first.seq == 1
        # welcome, snapshot, then entry frames until 3 are waiting: the 5th waits unread in the socket.
        assert client.stats().frames_received == 2 + 4 and client.session.last_seq == 4
        seqs = [first.seq]
        async for entry in stream:
            seqs.append(entry.seq)
            if entry.seq == 10:
                await client.stop()
        assert seqs == list(range(1, 11)) and client.stats().frames_received == 12

    asyncio.run(run_against(script, body))


def test_iterating_beside_a_running_client_and_ending_with_its_terminal_close() -> None:
    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        for frame in fresh_start():
            await ws.send(frame)
        await ws.send(entries(1, 2))
        await ws.send(json.dumps({"type": "error", "code": 4401, "name": "auth_failed", "reason": "revoked"}))
        await ws.close(4401, "authentication failed")

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        runner = asyncio.create_task(client.run())
        seqs: list[int] = []
        with pytest.raises(TerminalClose) as raised:
            async for entry in client:  # run() already runs: the iteration only reads
                seqs.append(entry.seq)
                with pytest.raises(RuntimeError, match="already being iterated"):
                    await anext(client.entries())
        assert seqs == [1, 2] and raised.value.code == 4401
        with pytest.raises(TerminalClose):
            await runner

    asyncio.run(run_against(script, body))


def test_entries_applied_before_a_gap_in_the_same_frame_are_yielded_once() -> None:
    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        if number == 1:
            for frame in fresh_start():
                await ws.send(frame)
            await ws.send(entries(1, 2, 4))  # 3 is missing: 1 and 2 are applied, 4 is not
        else:
            await ws.send(welcome(recovered=True))
            await ws.send(entries(3, 4, 5))

    async def body(client: StreamClient, received: list[dict[str, object]]) -> None:
        seqs: list[int] = []
        async for entry in client:
            seqs.append(entry.seq)
            if entry.seq == 5:
                await client.stop()
        assert seqs == [1, 2, 3, 4, 5] and client.stats().gaps == 1

    asyncio.run(run_against(script, body))


def test_the_async_for_example_of_the_python_consumer_page_runs_as_written() -> None:
    """docs/python-consumer.md's ``async for`` block, run against this file's server (its URL replaced)."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "python-consumer.md").read_text()
    section = page.split("## `async for entry in client`", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        for frame in fresh_start():
            await ws.send(frame)
        await ws.send(entries(1, 2, 3, 4))
        await ws.send(entries(5, 6))

    async def body(local: StreamClient, received: list[dict[str, object]]) -> None:
        made: list[StreamClient] = []

        def here(url: str, **options: object) -> StreamClient:  # the page's client, at this test's server
            made.append(StreamClient(local.url, **options))  # type: ignore[arg-type]
            return made[-1]

        namespace: dict[str, object] = {"StreamClient": here}
        exec(block, namespace)
        follow = namespace["follow"]
        await follow("a-token", 3)  # type: ignore[operator]
        [client] = made
        assert client.session.token == "a-token" and client.stats().terminal is None
        assert [seq for seq, _ in client.recent][:3] == [1, 2, 3]  # it stopped at 3: 4 may have been applied

    asyncio.run(run_against(script, body))
