"""The dashboard on a phone and at a glance, in real Chromium against a real gateway and Redis serving the two
demo streams with demo-sized data (``make demo``): the metrics stream (4 metrics of values 0..100, 25 events
a second each) and the orders stream (``sparkwire.examples.orders``: orders of 1..999.99 EUR at 20 a second
over 4 regions, made by the demo's own producer function, revised batch by batch in update mode).

* At 400 px wide (a phone) nothing is wider than the screen: no horizontal scrolling, every chart inside.
* The chart legends name the series and show values only while the pointer is on a chart.
* Value fields of different sizes (revenue ~25,000 EUR beside largestOrder ~990 EUR) get a chart each.
* The counters say where the results on the charts came from: loaded at open, live updates since.

Writes the docs' screenshots — docs/images/dashboard-{metrics,orders}{,-phone}.png — with
SPARKWIRE_UPDATE_DOCS_IMAGES=1 (otherwise to the test's tmp dir)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import redis as redis_lib
from playwright.sync_api import Browser, BrowserContext, Page, Route
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

from sparkwire.aggregator.job import metrics_spec, window_record
from sparkwire.aggregator.pipeline import WINDOW_SCHEMA
from sparkwire.examples.orders.job import job as orders_job
from sparkwire.examples.orders.produce import generate as generate_orders
from sparkwire.replaylog import ReplayLogReader, ReplayLogWriter
from sparkwire.spark.results.records import ResultEncoder
from sparkwire_harness.stack import GatewayProcess, RedisServer

from .browser import WAIT_MS, wait_js

DOCS_IMAGES = Path(__file__).resolve().parents[3] / "docs" / "images"
BASE_MS = 1_795_514_400_000  # 2026-11-24T10:00:00Z
WINDOW_MS, SLIDE_MS = 10_000, 5_000
METRICS = [f"metric-{n}" for n in range(4)]  # the demo producer's names (--metrics 4)
EVENTS_PER_WINDOW = 250  # --rate 100 over 4 metrics, 10 s windows
ORDERS_SCHEMA = StructType([  # revenue_per_region's result
    StructField("windowStart", TimestampType()), StructField("windowEnd", TimestampType()),
    StructField("region", StringType()), StructField("orders", LongType(), nullable=False),
    StructField("revenue", DecimalType(22, 2)), StructField("largestOrder", DecimalType(12, 2)),
])
DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 900}}
PHONE: dict[str, Any] = {"viewport": {"width": 400, "height": 860}, "is_mobile": True, "has_touch": True,
                         "device_scale_factor": 1}


class Metrics:
    """Window after window of every demo metric, as the metrics job commits them."""

    def __init__(self, redis: redis_lib.Redis, stream: str) -> None:
        self.stream = stream
        self.writer = ReplayLogWriter(redis, stream)
        self.writer.put_descriptor(json.dumps(metrics_spec(stream).descriptor(WINDOW_SCHEMA, "available")))
        self.windows = 0

    def commit(self, count: int) -> None:
        for _ in range(count):
            index, end = self.windows, BASE_MS + (self.windows + 1) * WINDOW_MS
            records = []
            for metric in METRICS:
                rng = random.Random(f"{metric}-{index}")
                values = [round(rng.uniform(0.0, 100.0), 3) for _ in range(rng.randint(200, 300))]
                records.append(window_record({
                    "processingId": f"{metric}-{end}", "metricName": metric, "windowStart": end - WINDOW_MS,
                    "windowEnd": end, "count": len(values), "sum": sum(values), "min": min(values),
                    "max": max(values), "avg": sum(values) / len(values)}, self.stream))
            self.writer.commit_batch("windows", index, records)
            self.windows += 1


class Orders:
    """The demo's orders (its producer's ``generate``: 20 a second, amounts 1..999.99, some repeated, some not
    orders), one micro-batch per second of event time; batch b delivers the revision, as of b, of every
    (window, region) its orders fall in (windows that start before the first order are left out)."""

    def __init__(self, redis: redis_lib.Redis, stream: str, seconds: int) -> None:
        spec = orders_job().spec
        self.spec = dataclasses.replace(spec, stream=stream)
        self.encoder = ResultEncoder(self.spec, ORDERS_SCHEMA)
        self.writer = ReplayLogWriter(redis, stream)
        self.writer.put_descriptor(json.dumps(self.spec.descriptor(ORDERS_SCHEMA, "available")))
        seen: set[str] = set()
        self.by_second: list[list[dict[str, Any]]] = [[] for _ in range(seconds)]
        for order in generate_orders(seed=1, count=seconds * 20, start_ms=BASE_MS, rate=20):
            if "region" in order and order["orderId"] not in seen:
                seen.add(order["orderId"])
                self.by_second[(order["ts"] - BASE_MS) // 1000].append(order)
        self.totals: dict[tuple[int, str], dict[str, Any]] = {}
        self.batches = 0

    def commit(self, count: int) -> None:
        for _ in range(count):
            touched: dict[tuple[int, str], None] = {}
            for order in self.by_second[self.batches]:
                last_start = order["ts"] - order["ts"] % SLIDE_MS
                for start in (last_start - SLIDE_MS, last_start):
                    if start < BASE_MS:
                        continue
                    key = (start, order["region"])
                    total = self.totals.setdefault(key, {"orders": 0, "revenue": Decimal(0), "largest": Decimal(0)})
                    amount = Decimal(order["amount"])
                    total["orders"] += 1
                    total["revenue"] += amount
                    total["largest"] = max(total["largest"], amount)
                    touched[key] = None
            rows = [{"windowStart": start * 1000, "windowEnd": (start + WINDOW_MS) * 1000, "region": region,
                     "orders": self.totals[start, region]["orders"], "revenue": self.totals[start, region]["revenue"],
                     "largestOrder": self.totals[start, region]["largest"]} for start, region in sorted(touched)]
            records = self.encoder.encode(rows, revision=self.batches).records
            self.writer.commit_batch("orders", self.batches, records, ordered=True)
            self.batches += 1

    def results(self) -> int:
        return len(self.totals)


def head(redis: redis_lib.Redis, stream: str) -> int:
    return ReplayLogReader(redis, stream).meta().last_seq


def open_page(context: BrowserContext, console: list[str], url: str) -> Page:
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto(url)
    return page


def charts_drawn(page: Page, keys: int) -> None:
    """Every card's charts drawn with every point the page holds, and painted."""
    try:
        page.wait_for_function("""keys => { const d = window.__sparkwire;
          return Object.keys(d.panels).length === keys && Object.entries(d.panels).every(([key, charts]) =>
            charts.length > 0 && charts.every((c) => c.data[0].length === d.series[key].length)); }""",
                               arg=keys, timeout=WAIT_MS)
    except PlaywrightTimeout as error:
        state = page.evaluate("""() => { const d = window.__sparkwire; return Object.fromEntries(
          Object.entries(d.panels).map(([key, charts]) => [key, { charts: charts.map((c) => c.data[0].length),
                                                                  series: d.series[key]?.length }])); }""")
        raise AssertionError(f"not every chart of {keys} cards drawn with its points: {state}") from error
    page.wait_for_timeout(150)  # the frame after setData paints


def counters(page: Page) -> dict[str, int]:
    return {name: int(page.locator(f"#{name}").inner_text()) for name in ("windows", "loaded", "applied")}


LEGENDS = """() => [...document.querySelectorAll("#charts .u-legend")].map((legend) => ({
  live: legend.classList.contains("u-live"),
  names: [...legend.querySelectorAll(".u-series")].filter((s) => s.checkVisibility())
    .map((s) => s.querySelector(".u-label").textContent),
  values: [...legend.querySelectorAll(".u-value")].filter((v) => v.checkVisibility()).map((v) => v.textContent),
  html: legend.outerHTML.slice(0, 600),
}))"""


def check_legends_show_values_on_hover_only(page: Page) -> None:
    # A chart redrawn after live entries lays its legend out again: wait for its names rather than read them
    # mid-layout (seen once, on a loaded machine, with every name not yet visible).
    try:
        page.wait_for_function("() => [...document.querySelectorAll('#charts .u-legend')].every((l) => "
                               "[...l.querySelectorAll('.u-series')].some((s) => s.checkVisibility()))",
                               timeout=WAIT_MS)
    except PlaywrightTimeout as error:
        raise AssertionError(f"a legend names no series: {page.evaluate(LEGENDS)}") from error
    for legend in page.evaluate(LEGENDS):
        assert (legend["live"], legend["values"]) == (False, []), legend
        assert legend["names"], legend
    hover_until(page, "every((l) => l.classList.contains('u-live'))", on_chart=True)
    for legend in page.evaluate(LEGENDS):  # every chart's (the cursor is synced): the time, then each value
        assert len(legend["values"]) == len(legend["names"]) and len(legend["names"]) >= 2, legend
        assert all(value not in ("", "--", "\u2013") for value in legend["values"]), legend
    hover_until(page, "every((l) => !l.classList.contains('u-live'))", on_chart=False)


def hover_until(page: Page, legends_hold: str, *, on_chart: bool) -> None:
    """Moves the pointer onto the first chart (or off every chart) until every legend ``legends_hold``: a move
    again each half second, as a user's hand would, since a chart laid out again after the move (a live redraw,
    seen once on a loaded machine) has had no pointer event since; fails with the legends as they were."""
    check = f"[...document.querySelectorAll('#charts .u-legend')].{legends_hold}"
    deadline = time.monotonic() + WAIT_MS / 1000
    nudge = 0
    while True:
        if on_chart:
            box = page.locator("#charts .card .u-over").first.bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] * 0.6 + nudge, box["y"] + box["height"] / 2)
        else:
            page.mouse.move(2 + nudge, 2)
        try:
            page.wait_for_function(f"() => {check}", timeout=500)
            return
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise AssertionError(f"legends never {legends_hold}: {page.evaluate(LEGENDS)}") from None
        nudge = 1 - nudge


def check_fits(page: Page) -> None:
    """No horizontal scrolling, and every chart within the screen."""
    fit = page.evaluate("""() => { const s = document.scrollingElement;
      return { scrollWidth: s.scrollWidth, clientWidth: s.clientWidth,
               right: Math.max(...[...document.querySelectorAll(".card, .uplot")].map(
                 (e) => e.getBoundingClientRect().right)) }; }""")
    assert fit["scrollWidth"] <= fit["clientWidth"], fit
    assert fit["right"] <= fit["clientWidth"], fit


def screenshot(page: Page, tmp_path: Path, name: str) -> None:
    page.mouse.move(2, 2)  # no hover in the picture
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("SPARKWIRE_UPDATE_DOCS_IMAGES") == "1":
        (DOCS_IMAGES / name).write_bytes(path.read_bytes())


def test_both_demo_streams_fit_a_phone_and_read_at_a_glance(
    browser: Browser, console: list[str], redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str,
    tmp_path: Path,
) -> None:
    metrics_name, orders_name = f"{unique_name}-metrics", f"{unique_name}-orders"
    metrics = Metrics(redis, metrics_name)
    metrics.commit(30)
    orders = Orders(redis, orders_name, seconds=75)
    orders.commit(65)
    gateway = GatewayProcess(tmp_path, redis_server.url, [metrics_name, orders_name]).start()
    desktop = browser.new_context(**DESKTOP)
    phone = browser.new_context(**PHONE)
    try:
        # The metrics stream on a desktop: opened from the history, then live windows.
        page = open_page(desktop, console, f"{gateway.http}/?stream={metrics_name}&maxDelayMs=1000")
        wait_js(page, "c.lastSeq === arg", head(redis, metrics_name))
        charts_drawn(page, len(METRICS))
        drawn = 30 * len(METRICS)
        assert counters(page) == {"windows": drawn, "loaded": drawn, "applied": 0}
        metrics.commit(2)
        wait_js(page, "c.lastSeq === arg", head(redis, metrics_name))
        charts_drawn(page, len(METRICS))
        live = 2 * len(METRICS)
        assert counters(page) == {"windows": drawn + live, "loaded": drawn, "applied": live}
        # One chart per card: avg in its min/max band, the counts as bars.
        labels = page.evaluate("Object.values(window.__sparkwire.panels).map((cs) => cs.map((c) => "
                               "c.series.map((s) => s.label)))")
        assert labels == [[["windowEnd", "count", "avg", "min", "max"]]] * len(METRICS)
        check_legends_show_values_on_hover_only(page)
        screenshot(page, tmp_path, "dashboard-metrics.png")

        # The orders stream on a desktop: revenue and largestOrder (both EUR, ~25x apart) each on its own chart.
        page.goto(f"{gateway.http}/?stream={orders_name}&maxDelayMs=1000")
        wait_js(page, "d.stream === arg[0] && c.lastSeq === arg[1]", [orders_name, head(redis, orders_name)])
        charts_drawn(page, 4)
        loaded = orders.results()
        assert counters(page) == {"windows": loaded, "loaded": loaded, "applied": 0}
        entries_before = head(redis, orders_name)
        orders.commit(10)  # each batch revises open windows; every 5 s one window per region is new
        wait_js(page, "c.lastSeq === arg", head(redis, orders_name))
        charts_drawn(page, 4)
        assert counters(page) == {"windows": orders.results(), "loaded": loaded,
                                  "applied": head(redis, orders_name) - entries_before}
        panels = page.evaluate("""() => Object.fromEntries(Object.entries(window.__sparkwire.panels).map(
          ([key, charts]) => [key, charts.map((c) => ({ labels: c.series.map((s) => s.label), max: c.scales.y.max,
                                                         count: c.scales.count?.max ?? null }))]))""")
        assert sorted(panels) == ["ap-south", "eu-west", "sa-east", "us-east"]
        for region, (revenue, largest) in panels.items():
            assert revenue["labels"] == ["windowEnd", "orders", "revenue (EUR)"], region
            assert largest["labels"] == ["windowEnd", "largestOrder (EUR)"], region
            assert revenue["max"] > 10 * largest["max"] and 500 < largest["max"] <= 1_100, (region, panels)
        check_legends_show_values_on_hover_only(page)
        screenshot(page, tmp_path, "dashboard-orders.png")
        page.close()

        # Both on a phone, 400 px wide: no horizontal scrolling, every chart on the screen.
        for name, file, keys in ((metrics_name, "dashboard-metrics-phone.png", len(METRICS)),
                                 (orders_name, "dashboard-orders-phone.png", 4)):
            page = open_page(phone, console, f"{gateway.http}/?stream={name}&maxDelayMs=1000")
            wait_js(page, "c.lastSeq === arg", head(redis, name))
            charts_drawn(page, keys)
            assert page.evaluate("document.documentElement.clientWidth") == 400
            check_fits(page)
            page.locator("#raw summary").click()  # the raw payloads, long JSON, fit too
            page.wait_for_function("() => document.querySelectorAll('#rows tr').length > 0", timeout=WAIT_MS)
            check_fits(page)
            page.locator("#raw summary").click()
            screenshot(page, tmp_path, file)
            page.close()
        assert [line for line in console if line.startswith(("[error]", "[pageerror]"))] == []
    finally:
        desktop.close()
        phone.close()
        gateway.stop()


def test_charts_show_when_the_chart_library_loads_after_the_cards_were_drawn(
    browser: Browser, console: list[str], redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str,
    tmp_path: Path,
) -> None:
    """uPlot is imported on the side: on a slow machine or network the cards are drawn before it has loaded,
    with their plot areas hidden. Once it loads, every card's charts are drawn and shown (they stayed hidden
    until the page was reloaded: found by the test above on a loaded machine)."""
    metrics = Metrics(redis, unique_name)
    metrics.commit(6)
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()
    context = browser.new_context(**DESKTOP)
    held: list[Route] = []
    # The chart library answered only when the test says.
    context.route("**/static/vendor/uPlot.esm.js", lambda route: held.append(route))
    try:
        page = open_page(context, console, f"{gateway.http}/?stream={unique_name}&maxDelayMs=1000")
        wait_js(page, "c.lastSeq === arg", head(redis, unique_name))
        page.wait_for_function("n => document.querySelectorAll('#charts .card').length === n",
                               arg=len(METRICS), timeout=WAIT_MS)
        assert len(held) == 1 and page.evaluate("Object.keys(window.__sparkwire.panels).length") == 0
        assert page.evaluate("[...document.querySelectorAll('#charts .plot')].every((p) => p.hidden)")
        held[0].continue_()
        charts_drawn(page, len(METRICS))
        shown = page.evaluate("[...document.querySelectorAll('#charts .plot')].map((p) => p.checkVisibility())")
        assert shown == [True] * len(METRICS)
        check_legends_show_values_on_hover_only(page)
        assert [line for line in console if line.startswith(("[error]", "[pageerror]"))] == []
    finally:
        context.close()
        gateway.stop()
