"""Real Chromium for the browser-client tests: Debian's build, driven by Playwright."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")  # Debian's, from `make setup`: Playwright's own download is not used
WAIT_MS = 30_000  # generous: the machine is shared; the tests themselves take a few seconds


def launch_chromium() -> Iterator[Browser]:
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


def open_page(browser: Browser, console: list[str], url: str, *, init_script: str | None = None) -> Page:
    """``url`` in a fresh profile (empty localStorage), its console and errors collected in ``console``."""
    context = browser.new_context()
    if init_script is not None:
        context.add_init_script(init_script)
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto(url)
    return page


# -- a page whose WebSocket is scripted (no server): the browser client fed exactly the frames a test wants --

SERVICES = Path(__file__).resolve().parents[3] / "services" / "sparkwire"
STATIC = SERVICES / "gateway" / "static"
BROWSER_CLIENT = SERVICES / "client" / "js" / "sparkwire-client.js"
FAKE_SOCKET = """
class FakeWebSocket {
  static CONNECTING = 0; static OPEN = 1; static CLOSING = 2; static CLOSED = 3;
  constructor(url) {
    this.url = url; this.sent = []; this.readyState = 0; this.closedWith = null;
    window.__sockets.push(this);
    setTimeout(() => { this.readyState = 1; this.onopen?.({}); });
  }
  send(text) { if (this.readyState !== 1) throw new Error("send on a socket that is not open"); this.sent.push(text); }
  close(code, reason) { this.closedWith = [code, reason]; this.readyState = 3; }
  deliver(...frames) { for (const frame of frames) this.onmessage?.({ data: frame }); }
  drop(code, reason = "") { this.readyState = 3; this.onclose?.({ code, reason }); }
}
window.__sockets = [];
window.WebSocket = FakeWebSocket;
"""


def scripted_page(browser: Browser, console: list[str], **options: object) -> Page:
    """A page whose WebSocket is ``FakeWebSocket``, with a started client in ``window.client``."""
    context = browser.new_context()
    context.add_init_script(FAKE_SOCKET)
    context.route("http://sparkwire.test/static/sparkwire-client.js", lambda route: route.fulfill(
        path=BROWSER_CLIENT, content_type="text/javascript"))
    context.route("http://sparkwire.test/", lambda route: route.fulfill(content_type="text/html", body="""
        <script type="module">import * as m from "/static/sparkwire-client.js"; window.m = m;</script>"""))
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto("http://sparkwire.test/")
    page.wait_for_function("window.m !== undefined", timeout=WAIT_MS)
    start_client(page, **options)
    return page


def start_client(page: Page, **options: object) -> None:
    """A new client in ``window.client`` (the previous one, if any, stopped), on fresh sockets."""
    page.evaluate("""options => {
      window.client?.stop();
      window.__sockets = [];
      window.events = [];
      window.client = new m.SparkwireClient({ stream: "s", storage: null, ...options,
        onEntry: (e) => events.push(["entry", e.seq, e.processingId]),
        onSnapshot: (state, info) => events.push(["snapshot", info.seq, info.reason, [...state.keys()].sort()]),
        onStatus: (s) => events.push(["status", s.state, s.code ?? null, s.delayMs ?? null, s.attempt ?? null]) });
      client.start();
    }""", options)


def socket_opened(page: Page, index: int) -> list[dict[str, Any]]:
    """What the client sent on socket ``index`` once it opened (its hello first)."""
    page.wait_for_function("i => window.__sockets[i]?.sent.length > 0", arg=index, timeout=WAIT_MS)
    return [json.loads(text) for text in page.evaluate("i => window.__sockets[i].sent", index)]


def deliver(page: Page, index: int, *frames: str) -> None:
    page.evaluate("([i, frames]) => window.__sockets[i].deliver(...frames)", [index, list(frames)])


def sent_acks(page: Page, index: int) -> list[dict[str, Any]]:
    return [frame for frame in socket_opened(page, index) if frame["type"] == "ack"]


def events(page: Page, kind: str) -> list[list[Any]]:
    return [event[1:] for event in page.evaluate("window.events") if event[0] == kind]


def wait_js(page: Page, predicate: str, arg: object = None) -> None:
    """Wait until ``predicate`` holds on the dashboard page, with ``d`` its hooks (``window.__sparkwire``) and
    ``c`` its client; fails with the client's stats, the history load, the chart counts and recent statuses."""
    try:
        page.wait_for_function(
            f"arg => {{ const d = window.__sparkwire; const c = d?.client; return !!c && ({predicate}); }}",
            arg=arg, polling=100, timeout=WAIT_MS)
    except Exception as error:
        state = page.evaluate("({stats: window.__sparkwire?.client?.stats(), load: window.__sparkwire?.historyLoad,"
                              " charts: window.__sparkwire?.chartStats,"
                              " statuses: window.__sparkwire?.statuses?.slice(-5)})")
        raise AssertionError(f"{predicate} (arg {arg}) did not hold: {state}") from error
