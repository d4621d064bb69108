"""StreamClient with ``filter=`` against a scripted in-process WebSocket server (issue 43): the filter checked
before connecting, 4422/4423 terminal with the error frame's reason, and a filtered stream over a drop and a
lost frame, exactly once. The frames are the protocol's reference server's (``view_feed``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection

from sparkwire.client import BackgroundClient, FilterError, Removal, StreamClient, TerminalClose
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.filter_form import filter_document, parse_filter
from sparkwire.protocol.server_frames import encode_error

from .test_connection import FAST, serve_script
from .test_view import OWN, expected, feed_frames, make_log, move_outs, snapshot, the_view, welcome


@pytest.mark.parametrize(("code", "name"), [(CloseCode.INVALID_FILTER, "invalid_filter"),
                                            (CloseCode.OUTSIDE_SCOPE, "outside_scope")])
def test_a_refused_filter_is_terminal_with_the_error_frames_reason(code: CloseCode, name: str) -> None:
    reason = "hello.filter.tenant asks for rows outside the token's scope for this stream " + "x" * 80

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        assert hello["filter"] == filter_document(parse_filter({"tenant": "globex"}))
        await ws.send(encode_error(code, reason))
        await ws.close(int(code), code.reason)

    async def body(url: str) -> None:
        client = StreamClient(url, filter={"tenant": "globex"}, reconnect=FAST)
        with pytest.raises(TerminalClose) as raised:
            await client.run()
        assert (raised.value.code, raised.value.name, raised.value.reason) == (int(code), name, reason)
        assert f"terminal close {int(code)} ({name}): {reason}" == str(raised.value)
        assert client.stats().terminal is raised.value and client.stats().reconnects == 0

    received = asyncio.run(serve_script(script, body))
    assert [f["type"] for f in received] == ["hello"]  # one connection, not retried


def test_a_bad_filter_raises_before_any_connection() -> None:
    connections = 0

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        nonlocal connections
        connections += 1

    async def body(url: str) -> None:
        with pytest.raises(FilterError, match=r"filter\.count\.gt must be a number"):
            StreamClient(url, filter={"count": {"gt": "10"}})
        with pytest.raises(FilterError, match=r"filter\.region"):
            BackgroundClient(url, filter={"region": []})  # raised here, not in the client's thread

    asyncio.run(serve_script(script, body))
    assert connections == 0


def test_a_filtered_stream_over_a_drop_and_a_lost_frame_is_applied_exactly_once() -> None:
    log = make_log(60)
    view = the_view(OWN)
    want_seqs, want_state = expected(log, OWN)
    hellos: list[dict[str, object]] = []

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        hellos.append(hello)
        if number == 1:
            await ws.send(welcome(view, recovered=False, reset="no_position"))
            for frame in [*snapshot(log, 0, view), *feed_frames(log[:20], view, 0)]:
                await ws.send(frame)
            await ws.close(1011, "internal error")
            return
        cursor = hello["cursor"]
        assert isinstance(cursor, dict) and cursor["view"] == view.id
        await ws.send(welcome(view))
        frames = feed_frames(log[:40] if number == 2 else log, view, cursor["seq"], seed=number)
        if number == 2:
            frames = frames[:1] + frames[2:]  # one lost: the client closes and resumes from its position
        for frame in frames:
            await ws.send(frame)

    removed: list[Removal] = []

    async def body(url: str) -> None:
        client = StreamClient(url, filter=OWN, reconnect=FAST, keep_applied=True, on_removal=removed.append)
        seen = []
        async for entry in client:
            seen.append(entry.seq)
            if client.cursor is not None and client.cursor.seq == 60:
                await client.stop()
        assert seen == want_seqs and [seq for seq, _ in client.applied] == want_seqs
        assert {k: item.seq for k, item in client.state.items()} == want_state
        stats = client.stats()
        assert (stats.gaps, stats.reconnects, stats.terminal) == (1, 2, None)
        assert stats.closes == {1011: 1, 1000: 1}  # the server's drop, then the client's gap close

    received = asyncio.run(serve_script(script, body))
    assert [h["cursor"]["seq"] for h in hellos[1:]] == [20, hellos[2]["cursor"]["seq"]]  # type: ignore[index]
    assert 20 <= hellos[2]["cursor"]["seq"] < 40  # type: ignore[index,operator]
    assert all(h["filter"] == filter_document(parse_filter(OWN)) for h in hellos)
    assert [(r.seq, r.key) for r in removed] == move_outs(log, OWN)  # each move-out told once
    acks = [f for f in received if f["type"] == "ack"]
    assert acks and acks[-1]["seq"] == 60


def test_the_filter_example_of_the_python_consumer_page_runs_as_written() -> None:
    """docs/python-consumer.md's ``filter=`` block, run against a scripted server (its URL replaced): the
    page's cards are the log's newest matching revisions, removals included."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "python-consumer.md").read_text()
    block = page.split("## Only some results: `filter=`", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    own: dict[str, object] = {"region": "eu", "count": {"ge": 10}}
    log = make_log(80)
    view = the_view(own)

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        assert hello["token"] == "a-token" and hello["filter"] == filter_document(parse_filter(own))
        await ws.send(welcome(view, recovered=False, reset="no_position"))
        for frame in [*snapshot(log, 0, view), *feed_frames(log, view, 0)]:
            await ws.send(frame)
        await ws.send(encode_error(CloseCode.OUTSIDE_SCOPE, "the scope changed"))
        await ws.close(int(CloseCode.OUTSIDE_SCOPE), "filter outside scope")

    async def body(url: str) -> None:
        namespace: dict[str, object] = {}
        exec(block, namespace)
        namespace["StreamClient"] = lambda _url, **options: StreamClient(url, reconnect=FAST, **options)
        cards: dict[str, object] = {}
        with pytest.raises(TerminalClose, match="outside_scope"):
            await namespace["follow_eu"]("a-token", cards)  # type: ignore[operator]
        latest = {e.key: e for e in log}
        assert cards == {k: json.loads(latest[k].data) for k in expected(log, own)[1]}
        assert cards and move_outs(log, own)

    asyncio.run(serve_script(script, body))


def test_async_for_tells_each_removal_in_its_place_among_the_entries() -> None:
    """A loop that renders what it takes, slower than the frames come: each removal reaches ``on_removal``
    after the entries before it were taken and before the next is yielded, so a key never shows again after
    its removal (with ``on_removal`` called as frames are handled, it would be told ahead of the loop)."""
    log = make_log(60)
    view = the_view(OWN)
    want_seqs, _ = expected(log, OWN)

    async def script(ws: ServerConnection, number: int, hello: dict[str, object]) -> None:
        await ws.send(welcome(view, recovered=False, reset="no_position"))
        for frame in [*snapshot(log, 0, view), *feed_frames(log, view, 0)]:
            await ws.send(frame)

    told: list[tuple[str, int]] = []

    async def body(url: str) -> None:
        client = StreamClient(url, filter=OWN, reconnect=FAST,
                              on_removal=lambda removal: told.append(("removal", removal.seq)))
        async for entry in client:
            await asyncio.sleep(0.005)  # rendering: the connection reads every frame meanwhile
            told.append(("entry", entry.seq))
            if entry.seq == want_seqs[-1]:
                await client.stop()

    asyncio.run(serve_script(script, body))
    removals = [("removal", seq) for seq, _key in move_outs(log, OWN)]
    want = sorted([("entry", seq) for seq in want_seqs] + [r for r in removals if r[1] < want_seqs[-1]],
                  key=lambda told_item: told_item[1])
    assert removals and told[:len(want)] == want
