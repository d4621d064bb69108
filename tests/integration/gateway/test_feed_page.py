"""The feed page (``/feed``, static/feed.html + feed.js) in real Chromium against a real gateway and Redis, over a
real-time stream committed as the relay commits it (``commit_rows``): the newest rows, newest first, each once —
from ``GET /history`` at open, then live, through a gateway killed and started again while rows are committed,
and after a reload."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from playwright.sync_api import Browser, Page

from sparkwire.replaylog import PositionedRecord, Record, ReplayLogWriter
from sparkwire_harness.stack import GatewayProcess, RedisServer

from .browser import WAIT_MS, launch_chromium

ROWS = 100
FIELDS = [("orderId", "string"), ("region", "string"), ("amount", "decimal(12,2)"), ("orderTime", "timestamp"),
          ("topic", "string"), ("partition", "integer"), ("offset", "long")]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launch_chromium()


class Feed:
    """A real-time stream's log, written as the relay writes it: one entry per row, by its Kafka position."""

    def __init__(self, redis: redis_lib.Redis, stream: str) -> None:
        self.stream = stream
        self.writer = ReplayLogWriter(redis, stream, retention=100_000)
        self.epoch = self.writer.commit_rows("realtime:feed", -1, []).epoch
        self.writer.put_descriptor(json.dumps({
            "version": 1, "stream": stream, "title": "Large orders", "mode": "append", "key": ["region"],
            "realtime": True, "schema": {"type": "struct", "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in FIELDS]}}))
        self.offset = 0

    def commit(self, count: int) -> None:
        rows = []
        for _ in range(count):
            pid = f"orders/0/{self.offset}"
            payload: dict[str, Any] = {"orderId": f"o-{self.offset}", "region": "eu-west", "amount": "512.50",
                                       "orderTime": "2026-11-29T10:00:00.000000Z", "topic": "orders", "partition": 0,
                                       "offset": self.offset, "processingId": pid}
            rows.append(PositionedRecord("orders/0", self.offset, 0, Record(pid, "eu-west", json.dumps(payload))))
            self.offset += 1
        self.writer.commit_rows("realtime:feed", 0, rows, fence=self.epoch)


def shown_seqs(page: Page) -> list[int]:
    return [int(s) for s in page.eval_on_selector_all("#rows tr", "trs => trs.map(tr => tr.dataset.seq)")]


def wait_top(page: Page, seq: int) -> None:
    page.wait_for_function("seq => Number(document.querySelector('#rows tr')?.dataset.seq) === seq", arg=seq,
                           polling=100, timeout=WAIT_MS)


def test_the_feed_shows_the_newest_rows_newest_first_each_once_through_a_gateway_restart_and_a_reload(
    browser: Browser, redis_server: RedisServer, unique_name: str, tmp_path: Path,
) -> None:
    feed = Feed(redis_lib.Redis.from_url(redis_server.url), unique_name)
    feed.commit(150)  # seqs 1..150
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()
    context = browser.new_context()
    console: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: console.append(str(error)))
        page.goto(f"{gateway.http}/feed?stream={unique_name}&rows={ROWS}&record=1")
        wait_top(page, 150)
        assert shown_seqs(page) == list(range(150, 50, -1)), console  # the last 100, newest first
        assert page.text_content("#title") == "Large orders"
        headers = page.eval_on_selector_all("#head th", "ths => ths.map(th => th.textContent)")
        assert headers == ["seq", "orderId", "region", "amount", "orderTime"]
        assert page.text_content("#rows tr:first-child td:nth-child(2)") == "o-149"

        feed.commit(20)  # live: 151..170
        wait_top(page, 170)
        gateway.process.kill()  # the page's connection drops; rows go on being committed meanwhile
        feed.commit(15)
        gateway.start()  # the same port: the client reconnects and resumes after its cursor
        feed.commit(5)
        wait_top(page, 190)
        assert shown_seqs(page) == list(range(190, 90, -1)), console
        state = page.evaluate("({added: window.__feed.rows.added, repeated: window.__feed.rows.repeated,"
                              " loaded: window.__feed.loaded, gaps: document.querySelector('#gaps').textContent})")
        assert state == {"added": 140, "repeated": 0, "loaded": ROWS, "gaps": "0"}, state  # 100 loaded + 40 live
        assert page.evaluate("window.__feed.statuses.filter(s => s === 'open').length") >= 2  # it did reconnect

        page.reload()
        wait_top(page, 190)
        assert shown_seqs(page) == list(range(190, 90, -1)), console
        assert not console, console
    finally:
        context.close()
        gateway.stop()
