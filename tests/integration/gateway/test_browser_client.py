"""The browser client (``client/js/sparkwire-client.js``, served at ``/static/sparkwire-client.js``) in real
Chromium, through the demo page the gateway serves, against real gateway processes and Redis: every entry of
the stream applied once, in order, while gateways are SIGKILLed and drained under it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis as redis_lib
from playwright.sync_api import Browser, Page

from sparkwire.protocol.close_codes import CLOSE_SPECS, CloseCode, is_resumable
from sparkwire.protocol.server_frames import (
    Welcome,
    encode_entry,
    encode_error,
    encode_snapshot,
    encode_welcome,
    pack_entries,
)
from sparkwire.replaylog import ReplayLogReader
from sparkwire.replaylog.model import Entry, Snapshot, StateItem
from sparkwire.replaylog.sessions import session_key
from sparkwire_harness.stack import NginxBalancer, RedisServer

from .browser import WAIT_MS, deliver, events, open_page, scripted_page, sent_acks, socket_opened, start_client
from .conftest import Committer, GatewayProcess, wait_for


def plain(frame: Any) -> Any:
    """A cursor or an ack without its digest (the scripted server's entries carry one; the Node tests of the
    client check that it goes back), or a list of them."""
    if isinstance(frame, list):
        return [plain(item) for item in frame]
    return {key: value for key, value in frame.items() if key != "digest"}


def demo_url(base: str, stream: str) -> str:
    """The dashboard as a plain client: history=0 keeps a fresh page on the protocol's own start (a
    no_position snapshot, then every entry); the history start is test_dashboard_history.py's."""
    return f"{base}/?stream={stream}&record=1&maxDelayMs=1000&history=0"


def wait_js(page: Page, predicate: str, arg: object = None) -> None:
    """Wait until ``predicate(client, arg)`` holds in the page; fails with the client's stats otherwise."""
    try:
        page.wait_for_function(f"arg => {{ const c = window.__sparkwire?.client; return !!c && ({predicate}); }}",
                               arg=arg, polling=100, timeout=WAIT_MS)
    except Exception as error:
        raise AssertionError(f"{predicate} (arg {arg}) did not hold: {stats(page)}") from error


def wait_seq(page: Page, seq: int) -> None:
    wait_js(page, "c.lastSeq >= arg", seq)


def stats(page: Page) -> dict[str, Any]:
    return dict(page.evaluate("(window.__sparkwire?.client ?? window.client).stats()"))


def received(page: Page) -> list[tuple[int, str]]:
    return [(seq, pid) for seq, pid in page.evaluate("window.__sparkwire.received")]


def page_state(page: Page) -> dict[str, tuple[int, str, object]]:
    items = page.evaluate("Object.fromEntries(window.__sparkwire.client.state)")
    return {key: (item["seq"], item["processingId"], item["data"]) for key, item in items.items()}


def log_entries(redis: redis_lib.Redis, stream: str) -> list[tuple[int, str]]:
    return [(e.seq, e.processing_id) for e in ReplayLogReader(redis, stream).iter_all()]


def latest_per_key(redis: redis_lib.Redis, stream: str) -> dict[str, tuple[int, str, object]]:
    state: dict[str, tuple[int, str, object]] = {}
    for entry in ReplayLogReader(redis, stream).iter_all():
        state[entry.key] = (entry.seq, entry.processing_id, json.loads(entry.data))
    return state


def session_position(redis: redis_lib.Redis, session: str, stream: str) -> tuple[int, int, int]:
    seq, duplicates, gaps = redis.hmget(session_key(session, stream), ["seq", "duplicates", "gaps"])
    return int(seq or -1), int(duplicates or 0), int(gaps or 0)


def assert_exactly_once(page: Page, redis: redis_lib.Redis, stream: str) -> dict[str, Any]:
    """The page applied the whole stream, seq 1..N in order, nothing twice, and acked the end of it."""
    log = log_entries(redis, stream)
    assert [seq for seq, _ in log] == list(range(1, len(log) + 1))
    wait_seq(page, len(log))
    got = received(page)
    first_difference = next((i for i, (a, b) in enumerate(zip(got, log, strict=False)) if a != b), None)
    assert got == log, f"{len(got)} applied of {len(log)}; first difference at index {first_difference}"
    assert page_state(page) == latest_per_key(redis, stream)
    final = stats(page)
    assert (final["duplicates"], final["gaps"], final["terminal"]) == (0, 0, None), final
    # The acks carried it to the server: the session holds the last seq and the client's zero counts.
    wait_for(lambda: session_position(redis, final["sessionId"], stream) == (len(log), 0, 0), timeout=10)
    return final


def test_the_page_applies_every_entry_once_through_a_sigkill_and_a_drain_of_its_gateway(
    browser: Browser, console: list[str], gateway: GatewayProcess, committer: Committer, unique_name: str,
    redis: redis_lib.Redis,
) -> None:
    page = open_page(browser, console, demo_url(gateway.http, unique_name))
    wait_js(page, "c.stats().connects >= 1")  # welcome + empty snapshot (seq 0): then every entry from 1
    committer.start()  # 100 entries/s
    wait_seq(page, 100)

    gateway.process.kill()  # SIGKILL: no close frame; the browser sees 1006 and retries with backoff
    gateway.start()  # same port
    wait_seq(page, committer.committed + 50)
    gateway.process.stop()  # SIGTERM: the pod drains, closing its clients with 1001 (server-side close)
    gateway.start()
    wait_seq(page, committer.committed + 50)
    committer.stop()

    final = assert_exactly_once(page, redis, unique_name)
    assert final["closes"].get("1006", 0) >= 1 and final["closes"].get("1001", 0) >= 1, final
    assert final["connects"] >= 3 and final["reconnects"] >= 2, final
    assert final["resets"] == {"no_position": 1}, "every reconnect resumed from the cursor, none from a snapshot"
    print(f"applied {final['cursor']['seq']} entries exactly once over {final['connects']} connections; "
          f"closes {final['closes']}, connection failures {final['connectionFailures']}, acks {final['acksSent']}")


def test_a_saved_cursor_of_another_epoch_is_replaced_by_a_snapshot_then_entries_follow_it(
    browser: Browser, console: list[str], gateway: GatewayProcess, committer: Committer, unique_name: str,
    redis: redis_lib.Redis,
) -> None:
    committer.commit(6)  # seqs 1..30
    # What a tab saved before the stream was reset: a cursor into an epoch that no longer exists.
    saved = {"v": 1, "session": "browser-stale-tab", "epoch": "an-epoch-long-gone", "seq": 12,
             "items": {"stale-key": {"seq": 12, "processingId": "pid-gone", "data": {"n": -1}}}}
    init = f"localStorage.setItem({json.dumps('sparkwire:' + unique_name)}, {json.dumps(json.dumps(saved))})"
    page = open_page(browser, console, demo_url(gateway.http, unique_name), init_script=init)

    wait_js(page, "window.__sparkwire.snapshots.length >= 2")
    snapshots = page.evaluate("window.__sparkwire.snapshots")
    epoch = ReplayLogReader(redis, unique_name).meta().epoch
    assert snapshots == [
        {"epoch": "an-epoch-long-gone", "seq": 12, "reason": "restored", "keys": 1},
        {"epoch": epoch, "seq": 30, "reason": "epoch_mismatch", "keys": 7},
    ]
    assert page_state(page) == latest_per_key(redis, unique_name)  # the stale key is gone

    committer.commit(4)  # seqs 31..50, applied on top of the snapshot
    wait_seq(page, 50)
    assert received(page) == log_entries(redis, unique_name)[30:]
    assert page_state(page) == latest_per_key(redis, unique_name)
    final = stats(page)
    assert (final["duplicates"], final["gaps"], final["resets"]) == (0, 0, {"epoch_mismatch": 1}), final
    # No pod issued the saved id (or it expired): the server handed out a new one, which the page adopted.
    assert final["sessionId"] != "browser-stale-tab"
    wait_for(lambda: session_position(redis, final["sessionId"], unique_name) == (50, 0, 0), timeout=10)


def test_a_reloaded_page_resumes_after_its_saved_cursor_with_its_state(
    browser: Browser, console: list[str], gateway: GatewayProcess, committer: Committer, unique_name: str,
    redis: redis_lib.Redis,
) -> None:
    committer.commit(4)  # seqs 1..20
    page = open_page(browser, console, demo_url(gateway.http, unique_name))
    wait_seq(page, 20)
    wait_js(page, "c.stats().acksSent >= 1")  # saved with the ack (at most ackIntervalMs later)
    session = stats(page)["sessionId"]

    page.reload()  # pagehide stops the client (a last ack); the new page restores the saved position
    wait_js(page, "c.stats().connects >= 1")
    committer.commit(2)  # seqs 21..30
    wait_seq(page, 30)
    after = stats(page)
    assert page.evaluate("window.__sparkwire.snapshots") == [
        {"epoch": ReplayLogReader(redis, unique_name).meta().epoch, "seq": 20, "reason": "restored", "keys": 7}]
    assert after["resets"] == {}, "resumed after the saved cursor: no snapshot"
    assert after["sessionId"] == session
    assert received(page) == log_entries(redis, unique_name)[20:]
    assert page_state(page) == latest_per_key(redis, unique_name)


def test_behind_nginx_killing_each_of_two_gateways_in_turn_loses_and_repeats_nothing(
    browser: Browser, console: list[str], gateway: GatewayProcess, committer: Committer, unique_name: str,
    redis: redis_lib.Redis, redis_server: RedisServer, tmp_path: Path,
) -> None:
    gateways = [gateway, GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()]
    nginx = NginxBalancer(tmp_path / "nginx", [g.port for g in gateways])
    nginx.start()
    try:
        page = open_page(browser, console, demo_url(nginx.url, unique_name))  # page and socket via nginx
        wait_js(page, "c.stats().connects >= 1")
        committer.start()
        wait_seq(page, 100)
        for victim in gateways:  # one of them holds the page's connection; the other takes it over
            victim.process.kill()
            wait_seq(page, committer.committed + 30)
            victim.start()
        committer.stop()
        final = assert_exactly_once(page, redis, unique_name)
        assert final["closes"].get("1006", 0) >= 1, final
        assert final["resets"] == {"no_position": 1}, final
    finally:
        nginx.stop()
        gateways[1].stop()


def test_behind_a_proxy_that_blocks_websockets_the_page_falls_back_to_sse_and_loses_and_repeats_nothing(
    browser: Browser, console: list[str], gateway: GatewayProcess, committer: Committer, unique_name: str,
    redis: redis_lib.Redis, redis_server: RedisServer, tmp_path: Path,
) -> None:
    gateways = [gateway, GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()]
    nginx = NginxBalancer(tmp_path / "nginx", [g.port for g in gateways], block_websockets=True)
    nginx.start()
    try:
        page = open_page(browser, console, demo_url(nginx.url, unique_name))
        wait_js(page, "c.stats().connects >= 1")
        assert stats(page)["transport"] == "sse", stats(page)
        committer.start()
        wait_seq(page, 100)
        for victim in gateways:  # one of them holds the page's event stream; the other takes it over
            victim.process.kill()
            wait_seq(page, committer.committed + 30)
            victim.start()
        committer.stop()
        final = assert_exactly_once(page, redis, unique_name)  # acks posted through nginx reached the session
        assert final["transport"] == "sse" and final["connectionFailures"] >= 1, final
        assert final["closes"].get("1006", 0) >= 2, final  # the refused WebSocket, then the killed pod
        assert final["resets"] == {"no_position": 1}, final
        access = (tmp_path / "nginx" / "access.log").read_text()
        assert '"GET /ws?' in access and '" 403 ' in access, "nginx refused the WebSocket"
        assert '"POST /sse/frames?' in access, "the acks went by POST"
    finally:
        nginx.stop()
        gateways[1].stop()


def test_the_close_code_table_is_the_servers(browser: Browser, console: list[str], gateway: GatewayProcess,
                                             unique_name: str) -> None:
    page = open_page(browser, console, demo_url(gateway.http, unique_name))
    module = "import('/static/sparkwire-client.js')"
    table = page.evaluate(f"{module}.then(m => m.CLOSE_CODES)")
    assert table == {str(int(code)): [code.name.lower(), spec.resumable] for code, spec in CLOSE_SPECS.items()}
    codes = [1000, 1001, 1002, 1005, 1006, 1011, 1012, 1013, 1014, 1015, 3000, 4400, 4409, 4999]
    resumable = page.evaluate(f"codes => {module}.then(m => codes.map(m.isResumable))", codes)
    assert resumable == [is_resumable(code) for code in codes]


# -- the client's frame handling in Chromium against a scripted socket (no server): what a real gateway
#    never does on purpose — gaps, repeats, malformed frames, terminal closes — built with its encoders ----

def welcome_frame(*, recovered: bool = True, reset: str | None = None, epoch: str = "e1", ack_every: int = 100,
                  ack_interval_ms: int = 60_000) -> str:
    return encode_welcome(Welcome(session="srv-session", epoch=epoch, head_seq=0, recovered=recovered, reset=reset,
                                  ack_every=ack_every, ack_interval_ms=ack_interval_ms))


def entries_frame(*seqs: int | tuple[int, str], epoch: str = "e1") -> str:
    pairs = [(s, f"p{s}") if isinstance(s, int) else s for s in seqs]
    items = [Entry(seq=s, processing_id=pid, key=f"k{s % 2}", data=f'{{"n":{s}}}', commit_ms=s, batch_id=0)
             for s, pid in pairs]
    [frame] = pack_entries(epoch, [encode_entry(item) for item in items])
    return frame


def test_scripted_repeats_are_dropped_a_gap_resumes_from_before_it_and_a_terminal_close_stops(
    browser: Browser, console: list[str]
) -> None:
    page = scripted_page(browser, console, initialDelayMs=1, maxDelayMs=1)
    [hello] = socket_opened(page, 0)
    assert hello["type"] == "hello" and hello["v"] == 1 and "cursor" not in hello and len(hello["session"]) == 32
    deliver(page, 0, welcome_frame(ack_every=3), entries_frame(1, 2), entries_frame(2, 3),  # seq 2 again
            entries_frame((4, "p1")), entries_frame(5))  # a new seq with a result already applied
    assert events(page, "entry") == [[1, "p1"], [2, "p2"], [3, "p3"], [5, "p5"]]
    assert plain(sent_acks(page, 0)) == [{"type": "ack", "seq": 3, "duplicates": 1, "gaps": 0}]  # every 3 entries

    deliver(page, 0, entries_frame(6, 8, 9))  # 7 is missing: 6 is applied, 8 and 9 are not
    assert plain(sent_acks(page, 0)[-1]) == {"type": "ack", "seq": 6, "duplicates": 2, "gaps": 1}
    closed = page.evaluate("window.__sockets[0].closedWith")
    assert closed == [1000, "gap: expected seq 7, got 8; resuming"]
    [hello] = socket_opened(page, 1)  # at once, from before the hole, in the server's session
    assert (hello["session"], plain(hello["cursor"])) == ("srv-session", {"epoch": "e1", "seq": 6})

    # A resume the server cannot serve: a snapshot in parts replaces the state only once whole.
    parts = encode_snapshot(Snapshot(epoch="e2", seq=50, items={
        f"key-{i}": StateItem(seq=40 + i, processing_id=f"q{i}", data={"i": i}) for i in range(5)}), 150)
    assert len(parts) > 1
    deliver(page, 1, welcome_frame(recovered=False, reset="cursor_too_old", epoch="e2"), *parts[:-1])
    assert events(page, "snapshot") == []
    deliver(page, 1, parts[-1], entries_frame(51, epoch="e2"), '{"type":"ping","t":17}')
    assert events(page, "snapshot") == [[50, "cursor_too_old", [f"key-{i}" for i in range(5)]]]
    assert events(page, "entry")[-1] == [51, "p51"]
    assert socket_opened(page, 1)[-1] == {"type": "pong", "t": 17}

    page.evaluate("window.__sockets[1].drop(1006)")  # dropped without a close frame: resume with backoff
    [hello] = socket_opened(page, 2)
    assert plain(hello["cursor"]) == {"epoch": "e2", "seq": 51}
    deliver(page, 2, encode_error(CloseCode.AUTH_FAILED, "token expired at 12:00"))
    page.evaluate("window.__sockets[2].drop(4401, 'authentication failed')")
    page.wait_for_timeout(100)
    final = stats(page)
    assert final["terminal"] == {"code": 4401, "name": "auth_failed", "reason": "token expired at 12:00"}
    assert page.evaluate("window.__sockets.length") == 3, "a terminal close is not retried"
    assert events(page, "status")[-1][:2] == ["failed", 4401]
    assert (final["duplicates"], final["gaps"], final["resets"]) == (2, 1, {"cursor_too_old": 1})
    assert final["closes"] == {"1000": 1, "1006": 1, "4401": 1}
    assert page.evaluate("Object.fromEntries(client.state)")["k1"] == {"seq": 51, "processingId": "p51",
                                                                       "data": {"n": 51}}


UNREADABLE_FRAMES = [
    "not json",
    '{"type":"entries","epoch":"e1","entries":[{"seq":"1","processingId":"p","key":"k","data":{},"commitMs":1}]}',
    '{"type":"entries","epoch":"e1","entries":[{"seq":1,"key":"k","data":{},"commitMs":1}]}',
    '{"type":"snapshot","epoch":"e1","seq":-1,"items":{},"more":false}',
    # beyond 2^53 a JavaScript number cannot tell seqs apart: refused rather than rounded
    '{"type":"entries","epoch":"e1","entries":[{"seq":9007199254740993,"processingId":"p","key":"k","data":{},'
    '"commitMs":1}]}',
    '{"type":"welcome"}',
]


def test_scripted_a_frame_the_client_cannot_read_stops_it(browser: Browser, console: list[str]) -> None:
    page = scripted_page(browser, console, initialDelayMs=1, maxDelayMs=1)
    for frame in UNREADABLE_FRAMES:
        if frame != UNREADABLE_FRAMES[0]:
            start_client(page, initialDelayMs=1, maxDelayMs=1)
        socket_opened(page, 0)
        deliver(page, 0, welcome_frame(), frame)
        final = stats(page)
        assert final["terminal"] is not None and final["terminal"]["code"] == 1002, (frame, final)
        code, reason = page.evaluate("window.__sockets[0].closedWith")
        assert code == 1000 and reason == final["terminal"]["reason"][:123]  # browsers cannot send 1002
        page.wait_for_timeout(20)
        assert page.evaluate("window.__sockets.length") == 1, f"retried after {frame}"
    # entries before the welcome are refused too; an unannounced snapshot is counted, not refused
    start_client(page)
    socket_opened(page, 0)
    deliver(page, 0, entries_frame(1))
    assert stats(page)["terminal"]["reason"] == "entries before welcome"
    start_client(page)
    socket_opened(page, 0)
    unannounced = '{"type":"snapshot","epoch":"e1","seq":0,"items":{},"more":false}'
    deliver(page, 0, welcome_frame(), unannounced, '{"type":"notice","text":"from a newer server"}')
    final = stats(page)
    assert (final["terminal"], final["resets"], final["unknownFrames"]) == (None, {"unannounced": 1}, 1)


def test_scripted_acks_by_time_a_final_ack_on_stop_and_backoff_with_jitter(
    browser: Browser, console: list[str]
) -> None:
    page = scripted_page(browser, console, initialDelayMs=40, maxDelayMs=100)
    socket_opened(page, 0)
    deliver(page, 0, welcome_frame(ack_interval_ms=100), entries_frame(1))
    page.wait_for_function("window.__sockets[0].sent.length >= 2", timeout=WAIT_MS)  # no frame needed
    assert plain(sent_acks(page, 0)) == [{"type": "ack", "seq": 1, "duplicates": 0, "gaps": 0}]
    page.evaluate("window.__sockets[0].drop(1001)")  # a draining pod: retried at once
    socket_opened(page, 1)
    for index in (1, 2, 3, 4):  # refused before any welcome: attempts grow, delays stay under the cap
        page.evaluate("i => window.__sockets[i].drop(1006)", index)
        socket_opened(page, index + 1)
    waits = [(code, delay, attempt) for state, code, delay, attempt in events(page, "status") if state == "waiting"]
    assert [(code, attempt) for code, _, attempt in waits] == [(1001, 1), (1006, 2), (1006, 3), (1006, 4), (1006, 5)]
    assert waits[0][1] == 0  # after a welcome, going_away is retried at once
    ceilings = [80, 100, 100, 100]  # full jitter in [0, min(maxDelayMs, initialDelayMs * 2^attempt)]
    assert all(0 <= delay <= ceiling for (_, delay, _), ceiling in zip(waits[1:], ceilings, strict=True)), waits
    deliver(page, 5, welcome_frame(), entries_frame(2, 3))
    page.evaluate("client.stop()")
    assert plain(sent_acks(page, 5)) == [{"type": "ack", "seq": 3, "duplicates": 0, "gaps": 0}]
    assert page.evaluate("window.__sockets[5].closedWith") == [1000, "client stopping"]
    page.wait_for_timeout(150)
    assert page.evaluate("window.__sockets.length") == 6, "stopped: no reconnect"


def test_scripted_an_expired_token_is_refreshed_and_the_client_resumes_at_once(
    browser: Browser, console: list[str]
) -> None:
    page = scripted_page(browser, console, token="first")
    page.evaluate("() => { client.options.refreshToken = async () => { events.push(['refresh']); return 'second'; }; }")
    assert socket_opened(page, 0)[0]["token"] == "first"
    deliver(page, 0, welcome_frame(recovered=False, reset="no_position"),
            encode_snapshot(Snapshot(epoch="e1", seq=3, items={}), 1 << 20)[0], entries_frame(4, 5))
    page.evaluate("window.__sockets[0].drop(4419, 'token expired')")
    hello = socket_opened(page, 1)[0]
    assert (hello["token"], plain(hello["cursor"])) == ("second", {"epoch": "e1", "seq": 5})
    assert len(events(page, "refresh")) == 1
    waiting = [event for event in events(page, "status") if event[0] == "waiting"]
    assert waiting[-1][1:3] == [4419, 0]  # no backoff: the server was fine, only the token was old


def test_scripted_without_a_refresh_hook_an_expired_token_is_terminal(browser: Browser, console: list[str]) -> None:
    page = scripted_page(browser, console, token="only")
    socket_opened(page, 0)
    page.evaluate("window.__sockets[0].drop(4419, 'token expired')")
    page.wait_for_function("client.terminal !== null", timeout=WAIT_MS)
    assert page.evaluate("client.terminal.code") == 4419
    assert page.evaluate("window.__sockets.length") == 1


def test_scripted_a_silent_server_is_left_and_the_client_resumes(browser: Browser, console: list[str]) -> None:
    # 2 s of silence, not less: the timer runs from the socket's open, and on a loaded machine the test's own
    # round trip to deliver the welcome took over 400 ms once, so the client left before it (no cursor).
    page = scripted_page(browser, console, silenceTimeoutMs=2_000, initialDelayMs=10, maxDelayMs=10)
    socket_opened(page, 0)
    deliver(page, 0, welcome_frame(recovered=True), entries_frame(1, 2))
    # Then nothing: a paused pod whose TCP connection stays open.
    hello = socket_opened(page, 1)[0]
    assert plain(hello["cursor"]) == {"epoch": "e1", "seq": 2}
    assert page.evaluate("window.__sockets[0].closedWith[0]") == 1000
    # Each silent socket left counts as an abnormal close (1006). The second socket is silent too, so on a
    # loaded machine it may have been left as well by the time this reads: one per socket left, not one.
    closes, sockets = page.evaluate("[client.stats().closes, window.__sockets.length]")
    assert list(closes) == ["1006"] and 1 <= closes["1006"] <= sockets, (closes, sockets)
