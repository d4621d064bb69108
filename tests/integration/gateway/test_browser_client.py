"""The browser client (``static/sparkwire-client.js``) in real Chromium, through the demo page the gateway
serves, against real gateway processes and Redis: every entry of the stream applied once, in order, while
gateways are SIGKILLed and drained under it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from playwright.sync_api import Browser, Page, sync_playwright

from sparkwire.gateway.close_codes import CLOSE_SPECS, is_resumable
from sparkwire.gateway.sessions import session_key
from sparkwire.replaylog import ReplayLogReader
from sparkwire.stack import NginxBalancer, RedisServer

from .conftest import Committer, GatewayProcess, wait_for

CHROMIUM = Path("/usr/bin/chromium")  # Debian's, from `make setup`: Playwright's own download is not used
WAIT_MS = 30_000  # generous: the machine is shared; the tests themselves take a few seconds


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not found: run `make setup` (or `apt-get install -y chromium`)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI's setup installs it: a missing browser there is a broken setup
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def console() -> Iterator[list[str]]:
    """The pages' console and errors, printed at teardown (shown by pytest when a test fails)."""
    lines: list[str] = []
    yield lines
    print("\n".join(lines))


def open_page(browser: Browser, console: list[str], url: str, *, init_script: str | None = None) -> Page:
    context = browser.new_context()  # a fresh profile: empty localStorage
    if init_script is not None:
        context.add_init_script(init_script)
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto(url)
    return page


def demo_url(base: str, stream: str) -> str:
    return f"{base}/?stream={stream}&record=1&maxDelayMs=1000"


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
    return dict(page.evaluate("window.__sparkwire.client.stats()"))


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
    assert final["sessionId"] == "browser-stale-tab"  # the server kept the saved session
    wait_for(lambda: session_position(redis, "browser-stale-tab", unique_name) == (50, 0, 0), timeout=10)


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


def test_the_close_code_table_is_the_servers(browser: Browser, console: list[str], gateway: GatewayProcess,
                                             unique_name: str) -> None:
    page = open_page(browser, console, demo_url(gateway.http, unique_name))
    module = "import('/static/sparkwire-client.js')"
    table = page.evaluate(f"{module}.then(m => m.CLOSE_CODES)")
    assert table == {str(int(code)): [code.name.lower(), spec.resumable] for code, spec in CLOSE_SPECS.items()}
    codes = [1000, 1001, 1002, 1005, 1006, 1011, 1012, 1013, 1014, 1015, 3000, 4400, 4409, 4999]
    resumable = page.evaluate(f"codes => {module}.then(m => codes.map(m.isResumable))", codes)
    assert resumable == [is_resumable(code) for code in codes]
