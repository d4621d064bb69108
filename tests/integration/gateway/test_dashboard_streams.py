"""The generic dashboard in real Chromium against a real gateway and Redis serving two streams, each drawn from
the descriptor its writer stored: the metrics stream (append mode, epoch-ms windows) and an update-mode orders
stream (``examples/orders``: revenue per region over sliding windows, decimals, ISO timestamps, every revision
of a window an entry of its own). The picker lists both; the orders page shows one card per region and one
point per window with the value of its latest revision — from the history, as live revisions move the point
in place, through a replay of older revisions and a reload —; its text field goes to a table; the metrics page
still draws every window once. (The docs' screenshots come from test_dashboard_glance.)"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import importlib.util
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import redis as redis_lib
from playwright.sync_api import Browser, Page
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

from sparkwire.aggregator.job import metrics_spec, window_record
from sparkwire.aggregator.pipeline import WINDOW_SCHEMA
from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.stream import StreamSpec
from sparkwire_harness.stack import GatewayProcess, RedisServer

from .browser import wait_js

ROOT = Path(__file__).resolve().parents[3]
BASE_MS = 1_795_514_400_000  # 2026-11-24T10:00:00Z
SLIDE_MS, WINDOW_MS = 5_000, 10_000
REGIONS = ["ap-south", "eu-west", "us-east"]
METRICS = ["api.requests", "cpu.percent", "queue.depth"]
# The orders example's result schema (revenue_per_region) and one text column, which the page puts in a table.
ORDERS_SCHEMA = StructType([
    StructField("windowStart", TimestampType()),
    StructField("windowEnd", TimestampType()),
    StructField("region", StringType()),
    StructField("orders", LongType(), nullable=False),
    StructField("revenue", DecimalType(22, 2)),
    StructField("largestOrder", DecimalType(12, 2)),
    StructField("largestOrderId", StringType()),
])
# What a point of the orders page holds: the payload's fields as delivered (decimals as exact strings).
POINT_FIELDS = ["processingId", "revision", "windowStart", "windowEnd", "revenue", "orders", "largestOrder",
                "largestOrderId"]


def orders_spec(stream: str) -> StreamSpec:
    """The orders example's spec (its ``job()``), on ``stream``, with the text column as a value field."""
    try:
        module = importlib.import_module("sparkwire.examples.orders.job")
    except ImportError:  # the example as a script beside the package
        spec = importlib.util.spec_from_file_location("orders_job", ROOT / "examples" / "orders" / "orders_job.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    base: StreamSpec = module.job().spec
    assert (base.mode, base.key, base.event_time) == ("update", "region", "windowEnd")
    return dataclasses.replace(base, stream=stream, value_fields=(*(base.value_fields or ()), "largestOrderId"))


def order_row(window: int, region: str, batch: int) -> dict[str, Any]:
    """Window ``window`` of ``region`` as micro-batch ``batch`` revises it (timestamps in microseconds, as
    ``encoding.prepare`` collects them)."""
    end_ms = BASE_MS + window * SLIDE_MS
    orders = 3 + (window * 7 + REGIONS.index(region) * 5 + batch * 3) % 11
    largest = Decimal(10 + (window + batch) % 9) + Decimal("0.90")
    revenue = largest * orders - Decimal("0.45") * (batch - window + 2)
    return {"windowStart": (end_ms - WINDOW_MS) * 1000, "windowEnd": end_ms * 1000, "region": region,
            "orders": orders, "revenue": revenue.quantize(Decimal("0.01")), "largestOrder": largest,
            "largestOrderId": f"o-{region}-{window}-{batch}"}


class Orders:
    """Micro-batch ``b`` revises windows ``b`` and ``b + 1`` of every region: each window gets a first revision
    one batch before its last, as an update-mode query's open windows do."""

    def __init__(self, redis: redis_lib.Redis, stream: str) -> None:
        self.spec = orders_spec(stream)
        self.encoder = ResultEncoder(self.spec, ORDERS_SCHEMA)
        self.writer = ReplayLogWriter(redis, stream)
        self.writer.put_descriptor(json.dumps(self.spec.descriptor(ORDERS_SCHEMA, "available")))
        self.batches = 0
        self.payloads: list[dict[str, Any]] = []  # every committed revision, in commit order

    def commit(self, count: int) -> None:
        for _ in range(count):
            batch = self.batches
            rows = [order_row(window, region, batch) for window in (batch, batch + 1) for region in REGIONS]
            records = self.encoder.encode(rows, revision=batch).records
            self.writer.commit_batch("orders", batch, records, ordered=True)
            self.payloads += [json.loads(record.payload) for record in records]
            self.batches += 1

    def latest(self) -> dict[str, list[dict[str, Any]]]:
        """Per region, the latest revision of each window, in window order: what the page must show."""
        newest: dict[str, dict[str, Any]] = {}
        for payload in self.payloads:
            known = newest.get(payload["processingId"])
            if known is None or payload["revision"] > known["revision"]:
                newest[payload["processingId"]] = payload
        out: dict[str, list[dict[str, Any]]] = {}
        for payload in sorted(newest.values(), key=lambda p: p["windowEnd"]):
            out.setdefault(payload["region"], []).append({name: payload[name] for name in POINT_FIELDS})
        return out


def metrics_stream(redis: redis_lib.Redis, stream: str, windows: int) -> list[Record]:
    """``windows`` windows of every metric, committed by the metrics job's own record builder, with its descriptor."""
    writer = ReplayLogWriter(redis, stream)
    writer.put_descriptor(json.dumps(metrics_spec(stream).descriptor(WINDOW_SCHEMA, "available")))
    committed: list[Record] = []
    for index in range(windows):
        end = BASE_MS + (index + 1) * WINDOW_MS
        records = [window_record({
            "processingId": f"{metric}-{end}", "metricName": metric, "windowStart": end - WINDOW_MS,
            "windowEnd": end, "count": 10 + (index * 3 + n) % 17, "sum": 0.0, "min": 40.0 + n * 30 - index % 5,
            "max": 60.0 + n * 30 + index % 7, "avg": 50.0 + n * 30 + (index % 9) - 4}, stream)
            for n, metric in enumerate(METRICS)]
        writer.commit_batch("windows", index, records)
        committed += records
    return committed


def head(redis: redis_lib.Redis, stream: str) -> int:
    return ReplayLogReader(redis, stream).meta().last_seq


def points(page: Page) -> dict[str, list[dict[str, Any]]]:
    series: dict[str, list[dict[str, Any]]] = page.evaluate("window.__sparkwire.series")
    return {key: [{name: point.get(name) for name in POINT_FIELDS} for point in pts] for key, pts in series.items()}


CHART = """() => Object.fromEntries(Object.entries(window.__sparkwire.panels).map(([key, charts]) => [key,
  charts.map((chart) => ({ labels: chart.series.map((s) => s.label),
                           data: chart.data.map((column) => [...column]) }))]))"""


def check_orders_page(page: Page, orders: Orders) -> None:
    """One card per region; per region one point per window, holding its latest revision, on the chart too."""
    want = orders.latest()
    assert sorted(page.locator("#charts .card").evaluate_all("cards => cards.map((c) => c.dataset.key)")) == REGIONS
    assert points(page) == want
    page.wait_for_function("n => Object.values(window.__sparkwire.charts).length === 3 && Object.values("
                           "window.__sparkwire.charts).every((c) => c.data[0].length === n)",
                           arg=orders.batches + 1, timeout=30_000)
    charts = page.evaluate(CHART)
    for region in REGIONS:
        # revenue (with the order counts as bars) and largestOrder on charts of their own: fields of different
        # sizes never share an axis (test_dashboard_glance shows why)
        chart, second = charts[region]
        assert chart["labels"] == ["windowEnd", "orders", "revenue (EUR)"], chart["labels"]
        assert second["labels"] == ["windowEnd", "largestOrder (EUR)"], second["labels"]
        xs, counts, revenue = chart["data"]
        assert second["data"][0] == xs
        largest = second["data"][1]
        assert xs == [_epoch_s(p["windowEnd"]) for p in want[region]]
        assert len(set(xs)) == len(xs), f"{region}: a window drawn twice"
        assert revenue == [float(p["revenue"]) for p in want[region]], region
        assert largest == [float(p["largestOrder"]) for p in want[region]], region
        assert counts == [p["orders"] for p in want[region]], region
        card = page.locator(f"#charts .card[data-key='{region}']")
        latest = want[region][-1]
        assert card.locator(".latest [data-field='revenue'] b").inner_text() == f"{latest['revenue']} EUR"
        assert card.locator(".latest [data-field='largestOrderId'] b").inner_text() == latest["largestOrderId"]
        table = card.locator("table.texts")
        assert table.is_visible()
        assert table.locator("th").all_inner_texts() == ["windowEnd", "revision", "largestOrderId"]
        assert table.locator("tr").nth(1).locator("td").all_inner_texts() == [
            latest["windowEnd"].replace("T", " ").replace(".000000Z", "Z"), str(latest["revision"]),
            latest["largestOrderId"]]


def _epoch_s(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


TAMPER = """
(() => {
  const order = localStorage.getItem("dashboard-test:tamper");
  if (order === null) return;
  localStorage.removeItem("dashboard-test:tamper");
  const { stream, clientSeq, clientDigest } = JSON.parse(order);
  const saved = JSON.parse(localStorage.getItem("sparkwire:" + stream));
  saved.seq = clientSeq;
  saved.digest = clientDigest;  // the entry's at that seq, as a stale tab has it
  localStorage.setItem("sparkwire:" + stream, JSON.stringify(saved));
})();
"""


def test_the_generic_page_draws_the_latest_revision_of_each_window_once_and_still_the_metrics(
    browser: Browser, console: list[str], redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str,
    tmp_path: Path,
) -> None:
    metrics_name, orders_name = f"{unique_name}-metrics", f"{unique_name}-orders"
    metric_records = metrics_stream(redis, metrics_name, 24)
    orders = Orders(redis, orders_name)
    orders.commit(10)  # windows 0..10, every one revised (window 10 once so far)
    gateway = GatewayProcess(tmp_path, redis_server.url, [metrics_name, orders_name]).start()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(TAMPER)
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    try:
        # No ?stream=: the first stream the gateway serves; the picker lists both.
        page.goto(f"{gateway.http}/?maxDelayMs=1000&record=1")
        wait_js(page, "c.lastSeq === arg", head(redis, metrics_name))
        assert page.evaluate("window.__sparkwire.stream") == metrics_name
        assert page.locator("#picker option").all_inner_texts() == [metrics_name, orders_name]
        assert page.locator("#picker").is_visible()

        # The metrics stream through its descriptor: every window once, as before.
        assert page.evaluate("window.__sparkwire.layout.source") == "descriptor"
        series = page.evaluate("window.__sparkwire.series")
        want_ids: dict[str, list[str]] = {}
        for record in metric_records:
            want_ids.setdefault(record.key, []).append(record.processing_id)
        assert {m: [p["processingId"] for p in pts] for m, pts in series.items()} == want_ids
        assert all(isinstance(p["windowEnd"], int) and p["count"] > 0 for pts in series.values() for p in pts)
        page.wait_for_function("() => Object.values(window.__sparkwire.charts).length === 3 && Object.values("
                               "window.__sparkwire.charts).every((c) => c.data[0].length === 24)", timeout=30_000)
        labels = page.evaluate("Object.values(window.__sparkwire.charts)[0].series.map((s) => s.label)")
        assert labels == ["windowEnd", "count", "avg", "min", "max"]
        assert page.locator("#windows").inner_text() == str(24 * len(METRICS))

        # The orders stream, chosen in the picker: opened from the history, every window at its latest revision.
        page.locator("#picker").select_option(orders_name)
        page.wait_for_url(f"**stream={orders_name}**")
        wait_js(page, "d.stream === arg[0] && c.lastSeq === arg[1]", [orders_name, head(redis, orders_name)])
        layout = page.evaluate("window.__sparkwire.layout")
        assert (layout["source"], layout["mode"], layout["revisions"]) == ("descriptor", "update", True)
        assert (layout["numericFields"], layout["textFields"]) == (["revenue", "orders", "largestOrder"],
                                                                    ["largestOrderId"])
        assert page.locator("#title").inner_text() == "Revenue per region"
        check_orders_page(page, orders)

        # Live revisions while the page is open: each batch moves window b's point (revised) and adds b + 1's.
        live_from = head(redis, orders_name)
        orders.commit(4)
        wait_js(page, "c.lastSeq === arg", head(redis, orders_name))
        revised = len(REGIONS) * 4
        assert page.evaluate("window.__sparkwire.chartStats") == {
            "added": revised, "replaced": 0, "revised": revised, "stale": 0, "dropped": 0}
        assert [seq for seq, _ in page.evaluate("window.__sparkwire.received")] == list(
            range(live_from + 1, head(redis, orders_name) + 1))
        check_orders_page(page, orders)
        # Both streams have descriptors: nothing failed to load (the favicon, unset, was a 404 in every console).
        assert [line for line in console if line.startswith(("[error]", "[pageerror]"))] == []

        # A reload whose saved cursor is stale: the gateway replays older revisions after newer ones; the
        # page keeps the newer (stale), and takes the repeats of the newest in place (replaced).
        replay_from = head(redis, orders_name) - 6 * len(REGIONS)
        replayed = orders.payloads[replay_from:]
        newest = {p["processingId"]: p["revision"] for p in orders.payloads}
        stale_entry = ReplayLogReader(redis, orders_name).read_after(replay_from - 1, 1)[0]
        page.evaluate("order => localStorage.setItem('dashboard-test:tamper', order)",
                      json.dumps({"stream": orders_name, "clientSeq": replay_from, "clientDigest": stale_entry.digest}))
        page.reload()
        wait_js(page, "c.stats().connects >= 1 && c.lastSeq === arg", head(redis, orders_name))
        assert page.evaluate("window.__sparkwire.historyRestored") is True
        stale = sum(1 for p in replayed if p["revision"] < newest[p["processingId"]])
        assert 0 < stale < len(replayed)
        assert page.evaluate("window.__sparkwire.chartStats") == {
            "added": 0, "replaced": len(replayed) - stale, "revised": 0, "stale": stale, "dropped": 0}
        check_orders_page(page, orders)

        # A plain reload, then more revisions: the same windows, each once, at the latest revision.
        page.reload()
        wait_js(page, "c.stats().connects >= 1 && c.lastSeq === arg", head(redis, orders_name))
        assert page.evaluate("window.__sparkwire.historyRestored") is True
        orders.commit(2)
        wait_js(page, "c.lastSeq === arg", head(redis, orders_name))
        check_orders_page(page, orders)
        stats = page.evaluate("window.__sparkwire.client.stats()")
        assert (stats["gaps"], stats["terminal"]) == (0, None), stats
        assert page.evaluate("window.__sparkwire.chartError") is None
    finally:
        context.close()
        gateway.stop()
