"""A fresh dashboard page opens full (``GET /history``, then live from exactly after it) in real Chromium against
a real gateway and Redis: every retained window drawn once, every later window drawn once, no gap between
the two; a metric with a single window gets a narrow axis; a history whose cursor the log trimmed before the
hello is followed by the snapshot and a backfill. (The docs' screenshots come from test_dashboard_glance.)"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from pathlib import Path
from typing import Any

import redis as redis_lib
from playwright.sync_api import Browser, Page, Route

from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter
from sparkwire_harness.stack import GatewayProcess

from .browser import WAIT_MS, scripted_page, socket_opened, wait_js

WINDOW_MS = 10_000
BASE_MS = 1_700_000_000_000
METRICS = {"api.requests": 120.0, "checkout.latency_ms": 250.0, "cpu.percent": 55.0, "queue.depth": 40.0}
RARE = "disk.errors"  # one window, older than every other: its latest result is in the state only


def window_record(metric: str, index: int) -> Record:
    """Window ``index`` of ``metric`` as the aggregator commits it (docs/replay-log.md, "Results")."""
    rng = random.Random(f"{metric}-{index}")
    level = METRICS.get(metric, 3.0)
    avg = level * (1 + 0.25 * math.sin(index / 9 + len(metric))) + rng.gauss(0, level / 25)
    spread = level * (0.15 + 0.1 * rng.random())
    count = rng.randint(20, 60)
    start = BASE_MS + index * WINDOW_MS
    end = start + WINDOW_MS
    pid = hashlib.sha1(f"{end}-{metric}".encode()).hexdigest()
    payload = {"processingId": pid, "metricName": metric, "windowStart": start, "windowEnd": end, "count": count,
               "sum": round(avg * count, 3), "min": round(avg - spread, 3), "max": round(avg + spread, 3),
               "avg": round(avg, 3)}
    return Record(pid, metric, json.dumps(payload))


class Windows:
    """One batch per window index (every metric of ``metrics``), committed through the real commit script."""

    def __init__(self, redis: redis_lib.Redis, stream: str, metrics: list[str], retention: int = 100_000) -> None:
        self.redis, self.stream, self.metrics = redis, stream, metrics
        self.writer = ReplayLogWriter(redis, stream, retention=retention)
        self.batch = 0
        self.committed: list[list[Record]] = []  # per batch

    def commit(self, index: int, metrics: list[str] | None = None, retention: int | None = None) -> None:
        if retention is not None:
            self.writer.retention = retention
        records = [window_record(metric, index) for metric in metrics or self.metrics]
        self.writer.commit_batch("windows", self.batch, records)
        self.batch += 1
        self.committed.append(records)

    def in_background(self, indexes: range, interval: float) -> threading.Thread:
        stop = threading.Event()

        def loop() -> None:
            for index in indexes:
                if stop.wait(interval):
                    return
                self.commit(index)

        thread = threading.Thread(target=loop, daemon=True, name="windows")
        thread.start()
        return thread

    def head(self) -> int:
        return ReplayLogReader(self.redis, self.stream).meta().last_seq


def open_dashboard(browser: Browser, console: list[str], url: str) -> Page:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto(url)
    return page




def drawn_ids(page: Page) -> dict[str, list[str]]:
    series: dict[str, list[dict[str, Any]]] = page.evaluate("window.__sparkwire.series")
    return {metric: [point["processingId"] for point in points] for metric, points in series.items()}


def ids_by_metric(batches: list[list[Record]]) -> dict[str, list[str]]:
    """The processingIds of ``batches`` per metric, in window order (batches are committed in window order)."""
    out: dict[str, list[str]] = {}
    for records in batches:
        for record in records:
            out.setdefault(record.key, []).append(record.processing_id)
    return out


CHARTS = """() => Object.fromEntries(Object.entries(window.__sparkwire.charts).map(([metric, chart]) => {
  const canvas = chart.root.querySelector("canvas");
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted += 1;
  return [metric, { points: chart.data[0].length, first: chart.data[0][0], last: chart.data[0].at(-1),
                    min: chart.scales.x.min, max: chart.scales.x.max, painted, pixels: canvas.width * canvas.height }];
}))"""


def test_a_fresh_page_opens_full_then_draws_every_live_window_once(
    browser: Browser, console: list[str], gateway: GatewayProcess, redis: redis_lib.Redis, unique_name: str,
    tmp_path: Path,
) -> None:
    metrics = sorted(METRICS)
    windows = Windows(redis, unique_name, metrics)
    windows.commit(0, [RARE])  # seq 1
    for index in range(1, 151):  # seqs 2..601
        windows.commit(index)
    # Live windows land while the page reads its history and says hello: the junction is exercised.
    live = windows.in_background(range(151, 191), interval=0.05)
    page = open_dashboard(browser, console, f"{gateway.http}/?stream={unique_name}&record=1&maxDelayMs=1000")
    live.join(timeout=60)
    head = windows.head()
    assert head == 1 + 190 * len(metrics)
    wait_js(page, "c.lastSeq === arg", head)

    load = page.evaluate("window.__sparkwire.historyLoad")
    assert "error" not in load, load
    history_seq = load["seq"]
    assert 601 <= history_seq < head, load
    assert (load["firstSeq"], load["entries"], load["items"], load["loaded"]) == (1, history_seq, 5, history_seq)
    # Live: exactly the seqs after the history, each once, in order.
    received = page.evaluate("window.__sparkwire.received")
    assert [seq for seq, _ in received] == list(range(history_seq + 1, head + 1))
    # Drawn: every window committed, each once, in window order (history and live together).
    want = ids_by_metric(windows.committed)
    assert drawn_ids(page) == want
    assert page.evaluate("window.__sparkwire.chartStats") == {"added": head - history_seq, "replaced": 0, "revised": 0,
                                                           "stale": 0, "dropped": 0}
    stats = page.evaluate("window.__sparkwire.client.stats()")
    assert (stats["duplicates"], stats["gaps"], stats["resets"], stats["terminal"]) == (0, 0, {}, None), stats
    assert page.evaluate("window.__sparkwire.snapshots") == []
    assert page.locator("#notice").inner_text() == ""
    assert page.locator("#windows").inner_text() == str(head)

    # The charts hold and paint the same; the single window's axis spans windows, not years.
    page.wait_for_function("n => Object.values(window.__sparkwire.charts).length === 5 && Object.entries("
                           "window.__sparkwire.charts).every(([m, c]) => c.data[0].length === (m === 'disk.errors'"
                           " ? 1 : n))", arg=190, timeout=WAIT_MS)
    page.wait_for_timeout(200)  # the frame after setData paints the canvas
    charts = page.evaluate(CHARTS)
    for metric in metrics:
        chart = charts[metric]
        assert chart["points"] == 190
        assert (chart["min"], chart["max"]) == (chart["first"], chart["last"]), f"{metric}: {chart}"
        assert chart["painted"] > chart["pixels"] // 100, f"{metric}: the canvas is (nearly) blank: {chart}"
    rare = charts[RARE]
    window_s = WINDOW_MS / 1000
    assert rare["points"] == 1
    assert rare["min"] < rare["first"] < rare["max"], rare
    assert rare["max"] - rare["min"] <= 6 * window_s + 1e-6, f"the axis of one window spans {rare}"
    assert rare["first"] - rare["min"] >= 2 * window_s and rare["max"] - rare["first"] >= 2 * window_s, rare

    page.context.close()

    # Bounded: a fresh page asking for the last 100 entries draws those, and every metric's card.
    bounded = open_dashboard(browser, console, f"{gateway.http}/?stream={unique_name}&history=100")
    wait_js(bounded, "d.historyLoad !== null && c.welcome !== null")
    load = bounded.evaluate("window.__sparkwire.historyLoad")
    assert (load["seq"], load["entries"], load["items"], load["loaded"]) == (head, 100, 5, 101)
    drawn = drawn_ids(bounded)
    assert drawn == {**{metric: want[metric][-25:] for metric in metrics}, RARE: want[RARE]}
    windows.commit(191)
    wait_js(bounded, "c.lastSeq === arg", head + len(metrics))
    assert {metric: len(ids) for metric, ids in drawn_ids(bounded).items()} == {**dict.fromkeys(metrics, 26), RARE: 1}
    bounded.context.close()


def test_a_history_the_log_trimmed_before_the_hello_is_followed_by_a_snapshot_and_a_backfill(
    browser: Browser, console: list[str], gateway: GatewayProcess, redis: redis_lib.Redis, unique_name: str,
) -> None:
    metrics = ["api.requests", "queue.depth"]
    windows = Windows(redis, unique_name, metrics)
    for index in range(50):  # seqs 1..100
        windows.commit(index)
    trimmed = {"done": False}

    def read_then_trim(route: Route) -> None:
        """The page's first history read answers, then 150 more windows land and the log keeps only the
        last 100 entries — all before the page's hello: its cursor (seq 100) is gone from the log."""
        if trimmed["done"]:
            return route.continue_()
        response = route.fetch()
        for index in range(50, 125):  # seqs 101..250; the log keeps 151..250
            windows.commit(index, retention=100)
        trimmed["done"] = True
        route.fulfill(response=response)

    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.route("**/history?*", read_then_trim)
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto(f"{gateway.http}/?stream={unique_name}&record=1&maxDelayMs=1000")
    wait_js(page, "d.backfills.length === 1 && (d.backfills[0].lowest !== null || d.backfills[0].error !== null)")
    assert page.evaluate("window.__sparkwire.historyLoad")["seq"] == 100
    snapshots = page.evaluate("window.__sparkwire.snapshots")
    assert [(s["reason"], s["seq"], s["keys"]) for s in snapshots] == [("cursor_too_old", 250, 2)]
    backfill = page.evaluate("window.__sparkwire.backfills[0]")
    assert (backfill["lowest"], backfill["error"], backfill["seq"]) == (151, None, 250), backfill
    for index in range(125, 130):  # live after the snapshot: seqs 251..260
        windows.commit(index)
    wait_js(page, "c.lastSeq === arg", 260)

    # Drawn: the history's windows, then every window the log still held, then live; each once. The 25
    # windows per metric trimmed before the hello are gone from the log, and the page says so.
    kept = windows.committed[:50] + windows.committed[75:]
    assert drawn_ids(page) == ids_by_metric(kept)
    assert [seq for seq, _ in page.evaluate("window.__sparkwire.received")] == list(range(251, 261))
    notice = page.locator("#notice").inner_text()
    assert "cursor_too_old" in notice and "missing" in notice, notice
    stats = page.evaluate("window.__sparkwire.client.stats()")
    assert (stats["duplicates"], stats["gaps"], stats["resets"]) == (0, 0, {"cursor_too_old": 1}), stats
    context.close()


def test_start_after_sends_the_position_as_the_cursor_and_takes_the_items_as_state(
    browser: Browser, console: list[str],
) -> None:
    """The browser client's ``startAfter`` on a scripted socket: the hello's cursor, the state, the refusals."""
    page = scripted_page(browser, console)
    result = page.evaluate("""() => {
      client.stop();
      window.__sockets = [];
      const make = (storage = null) => new m.SparkwireClient({ stream: "s", storage });
      const fresh = make();
      const item = { seq: 40, processingId: "p40", data: { n: 40 } };
      const taken = fresh.startAfter({ epoch: "e1", seq: 42, items: { k: item } });
      const malformed = make();
      let error = null;
      try { malformed.startAfter({ epoch: "e1", seq: -1 }); } catch (e) { error = `${e.name}: ${e.message}`; }
      const saved = { getItem: () => JSON.stringify({ v: 1, session: "s1", epoch: "e0", seq: 7, items: {} }),
                      setItem() {}, removeItem() {} };
      const restored = make(saved);
      const ignored = restored.startAfter({ epoch: "e1", seq: 42 });
      return { taken, cursor: fresh.cursor, state: [...fresh.state], error, malformedRunning: malformed.running,
               ignored, restoredCursor: restored.cursor, running: [fresh.running, restored.running] };
    }""")
    assert result == {"taken": True, "cursor": {"epoch": "e1", "seq": 42},
                      "state": [["k", {"seq": 40, "processingId": "p40", "data": {"n": 40}}]],
                      "error": "TypeError: position.seq must be a non-negative integer, got -1",
                      "malformedRunning": False, "ignored": False, "restoredCursor": {"epoch": "e0", "seq": 7},
                      "running": [True, True]}
    hellos = [socket_opened(page, i)[0] for i in range(2)]
    assert [hello.get("cursor") for hello in hellos] == [{"epoch": "e1", "seq": 42}, {"epoch": "e0", "seq": 7}]
