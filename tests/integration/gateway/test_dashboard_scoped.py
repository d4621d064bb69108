"""The dashboard opened with a tenant's token (issue 43) in real Chromium against a real gateway (auth on) and Redis:
over an update-mode stream holding several tenants' rows (and rows whose tenant is null or absent), the page shows
exactly its tenant's rows — from ``GET /history``, live, in the raw table, in its text — and none of another's, a
page of another tenant in the same browser never draws what the first saved; with a filter in the URL, a key whose
newest revision moves out of the filter loses its card and gets it back, with its current revision, when it moves
in; a filter naming another tenant's rows is refused."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jwt
import pytest
import redis as redis_lib
from playwright.sync_api import Browser, BrowserContext, Page

from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter
from sparkwire_harness.stack import GatewayProcess, RedisServer

from .browser import WAIT_MS, wait_js
from .conftest import SECRET

BASE_MS = 1_795_514_400_000  # 2026-11-24T10:00:00Z
# Accounts and their tenant: three tenants, one account whose tenant is JSON null and one without the field.
ACCOUNTS = {"acme-1": "acme", "acme-2": "acme", "acme-3": "acme", "globex-1": "globex", "globex-2": "globex",
            "initech-1": "initech", "nulled-1": None, "nobody-1": "absent"}
ACME = sorted(k for k, t in ACCOUNTS.items() if t == "acme")
OTHERS = sorted(k for k, t in ACCOUNTS.items() if t != "acme")
# Marks of other tenants' rows: none of it may be anywhere on acme's page.
FOREIGN = ["globex", "initech", "nulled", "nobody"]


def descriptor(stream: str) -> dict[str, Any]:
    fields = [("account", "string"), ("tenant", "string"), ("status", "string"), ("balance", "double"),
              ("updatedAt", "timestamp")]
    return {"version": 1, "stream": stream, "title": "Balances per account", "mode": "update", "key": ["account"],
            "id": {"from": ["account"]}, "eventTime": "updatedAt", "window": None,
            "valueFields": ["balance", "status"], "units": {"balance": "EUR"},
            "schema": {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}}
                                                    for n, t in fields]},
            "revisions": True, "rebuild": "available"}


class Accounts:
    """An update-mode stream: one result per account, every micro-batch a revision of some of them."""

    def __init__(self, redis: redis_lib.Redis, stream: str) -> None:
        self.redis, self.stream = redis, stream
        self.writer = ReplayLogWriter(redis, stream, retention=100_000)
        self.writer.put_descriptor(json.dumps(descriptor(stream)))
        self.batch = 0
        self.newest: dict[str, dict[str, Any]] = {}  # account -> its newest revision's payload

    def commit(self, changes: dict[str, str]) -> None:
        """One micro-batch: a revision of each account in ``changes`` with that status."""
        records = []
        for account, status in sorted(changes.items()):
            pid = hashlib.sha1(account.encode()).hexdigest()
            payload: dict[str, Any] = {
                "processingId": pid, "revision": self.batch, "account": account, "status": status,
                "balance": round(100 + 7.5 * self.batch + len(account), 2),
                "updatedAt": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z",
                                           time.gmtime((BASE_MS + self.batch * 5_000) / 1000))}
            tenant = ACCOUNTS[account]
            if tenant != "absent":
                payload["tenant"] = tenant  # None: a JSON null
            records.append(Record(f"{pid}@{self.batch}", account, json.dumps(payload)))
            self.newest[account] = payload
        self.writer.commit_batch("accounts", self.batch, records, ordered=True)
        self.batch += 1

    def head(self) -> int:
        return ReplayLogReader(self.redis, self.stream).meta().last_seq


def token(stream: str, tenant: str) -> str:
    now = int(time.time())
    return jwt.encode({"sub": f"user-of-{tenant}", "streams": [stream], "iat": now, "exp": now + 900,
                       "scope": {stream: {"tenant": tenant}}}, SECRET, algorithm="HS256")


@pytest.fixture
def secured(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name], auth_secret=SECRET).start()
    yield process
    process.process.stop()


# Every card key ever put in the page, from the start of each document (before the page's own script).
EVER_CARDS = """
window.__everCards = [];
new MutationObserver((changes) => {
  for (const change of changes) for (const node of change.addedNodes) {
    if (node.nodeType === 1 && node.classList.contains("card")) window.__everCards.push(node.dataset.key);
  }
}).observe(document, { childList: true, subtree: true });
"""


def new_context(browser: Browser, console: list[str]) -> BrowserContext:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(EVER_CARDS)
    context.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    context.on("weberror", lambda error: console.append(f"[pageerror] {error.error}"))
    return context


def url(gateway: GatewayProcess, stream: str, tenant: str, filter_: dict[str, Any] | None = None) -> str:
    query = f"?stream={stream}" + (f"&filter={quote(json.dumps(filter_))}" if filter_ is not None else "")
    return f"{gateway.http}/{query}#token={token(stream, tenant)}"


def cards(page: Page) -> list[str]:
    keys: list[str] = page.locator("#charts .card").evaluate_all("cards => cards.map((c) => c.dataset.key)")
    return sorted(keys)


def wait_at(page: Page, seq: int) -> None:
    """The page's client covers the log up to ``seq`` and the page has drawn since."""
    wait_js(page, "c.cursor?.seq === arg && c.welcome !== null && d.history.dirty.size === 0", seq)


def shown(page: Page, tenant_keys: list[str], accounts: Accounts) -> None:
    """Exactly ``tenant_keys`` everywhere the page shows rows, each with its newest revision."""
    assert cards(page) == tenant_keys
    assert sorted(page.evaluate("Object.keys(window.__sparkwire.series)")) == tenant_keys
    assert sorted(page.evaluate("[...window.__sparkwire.client.state.keys()]")) == tenant_keys
    # The raw table, rendered on the details' toggle event (dispatched after the click): wait for it, since the
    # table still holds what it showed when it was last open.
    page.locator("#raw summary").click()
    page.wait_for_function("keys => JSON.stringify([...document.querySelectorAll('#rows tr td:first-child')]"
                           ".map((td) => td.textContent).sort()) === JSON.stringify(keys)",
                           arg=tenant_keys, polling=100, timeout=WAIT_MS)
    page.locator("#raw summary").click()
    for key in tenant_keys:
        newest = accounts.newest[key]
        card = page.locator(f"#charts .card[data-key='{key}']")
        assert card.locator("h2 span").inner_text() == f"1 result · revision {newest['revision']}"
        assert card.locator(".latest [data-field='balance'] b").inner_text() == f"{newest['balance']:g} EUR"


def test_a_page_opened_with_a_tenants_token_shows_that_tenants_rows_only(
    browser: Browser, console: list[str], secured: GatewayProcess, redis: redis_lib.Redis, unique_name: str,
    tmp_path: Path,
) -> None:
    accounts = Accounts(redis, unique_name)
    accounts.commit(dict.fromkeys(ACCOUNTS, "open"))
    accounts.commit({"acme-2": "closed", "globex-1": "closed", "nulled-1": "closed", "nobody-1": "closed"})
    context = new_context(browser, console)
    page = context.new_page()
    page.goto(url(secured, unique_name, "acme"))
    wait_at(page, accounts.head())
    load = page.evaluate("window.__sparkwire.historyLoad")
    assert load["entries"] == 4 and load["items"] == 3 and load["seq"] == accounts.head(), load  # acme's of 10
    assert page.evaluate("window.__sparkwire.client.view") is not None  # its cursor is the view's: resumed, no snapshot
    assert page.evaluate("window.__sparkwire.snapshots") == []
    shown(page, ACME, accounts)

    # Live: every tenant's rows committed, acme's only drawn.
    accounts.commit({"acme-1": "closed", "globex-2": "closed", "initech-1": "closed", "nulled-1": "open"})
    accounts.commit({"acme-3": "open", "globex-1": "open", "nobody-1": "open"})
    wait_at(page, accounts.head())
    shown(page, ACME, accounts)
    assert page.locator("#only").inner_text() == "only: tenant = acme (your token)"
    text = page.locator("body").inner_text()
    assert not [mark for mark in FOREIGN if mark in text], text
    assert sorted(set(page.evaluate("window.__everCards"))) == ACME
    page.screenshot(path=str(tmp_path / "scoped-page.png"), full_page=True)
    wait_js(page, "c.stats().acksSent > 0")  # its position and charts are saved in this browser

    # Another tenant in the same browser (its localStorage holding acme's position and charts): never one of
    # acme's cards, not even before the gateway answers; the saved position of acme's view gets a snapshot.
    page.goto("about:blank")
    page.goto(url(secured, unique_name, "globex"))
    wait_at(page, accounts.head())
    globex = sorted(k for k, t in ACCOUNTS.items() if t == "globex")
    assert [s["reason"] for s in page.evaluate("window.__sparkwire.snapshots")] == ["restored", "view_changed"]
    shown(page, globex, accounts)
    assert sorted(set(page.evaluate("window.__everCards"))) == globex
    assert "acme" not in page.locator("body").inner_text()
    page.close()

    # And a fresh profile with a token of initech, whose only account's newest revision is closed.
    page = new_context(browser, console).new_page()
    page.goto(url(secured, unique_name, "initech"))
    wait_at(page, accounts.head())
    shown(page, ["initech-1"], accounts)
    assert "acme" not in page.locator("body").inner_text()
    page.close()
    assert not [line for line in console if "pageerror" in line]


def test_a_key_moving_out_of_the_filter_loses_its_card_and_gets_it_back_when_it_moves_in(
    browser: Browser, console: list[str], secured: GatewayProcess, redis: redis_lib.Redis, unique_name: str,
) -> None:
    accounts = Accounts(redis, unique_name)
    accounts.commit(dict.fromkeys(ACCOUNTS, "open"))
    accounts.commit({"acme-3": "closed", "globex-1": "closed"})  # acme-3 left the view before the page opened
    page = new_context(browser, console).new_page()
    page.goto(url(secured, unique_name, "acme", {"status": "open"}))
    wait_at(page, accounts.head())
    assert page.locator("#only").inner_text() == "only: tenant = acme (your token) · status = open (filter)"
    shown(page, ["acme-1", "acme-2"], accounts)  # acme-3's open revision is in the history, its newest is not

    accounts.commit({"acme-1": "closed", "globex-2": "closed", "nulled-1": "closed"})  # move-out
    wait_at(page, accounts.head())
    shown(page, ["acme-2"], accounts)
    assert page.evaluate("window.__sparkwire.removals") == [[accounts.head() - 2, "acme-1"]]
    assert page.locator("#removals").inner_text() == "1"

    accounts.commit({"acme-1": "closed", "acme-2": "open"})  # acme-1 again outside: nothing more to remove
    accounts.commit({"acme-1": "open", "acme-3": "open", "globex-1": "open"})  # both move in
    wait_at(page, accounts.head())
    shown(page, ACME, accounts)  # with their current revision
    assert [key for _, key in page.evaluate("window.__sparkwire.removals")] == ["acme-1"]
    assert sorted(set(page.evaluate("window.__everCards"))) == ACME
    assert "globex" not in page.locator("body").inner_text()
    assert not [line for line in console if "pageerror" in line]


def test_a_filter_naming_another_tenants_rows_is_refused_not_widened(
    browser: Browser, console: list[str], secured: GatewayProcess, redis: redis_lib.Redis, unique_name: str,
) -> None:
    accounts = Accounts(redis, unique_name)
    accounts.commit(dict.fromkeys(ACCOUNTS, "open"))
    page = new_context(browser, console).new_page()
    page.goto(url(secured, unique_name, "acme", {"tenant": "globex"}))
    wait_js(page, "c.terminal !== null")
    assert page.evaluate("window.__sparkwire.client.terminal.code") == 4423
    assert page.locator("#status").inner_text().startswith("failed (4423")
    assert "403" in page.locator("#notice").inner_text()  # the history was refused too
    assert cards(page) == [] and page.evaluate("window.__everCards") == []
