"""The dashboard's pure logic (``static/dashboard.js``) in real Chromium, no server: payload values, layouts
from real descriptors (built by the Python specs the writers use) and inferred ones, the chart series, the
axis, and the history's revision keeping, saving and restoring."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

from sparkwire.aggregator.job import metrics_spec
from sparkwire.aggregator.pipeline import WINDOW_SCHEMA
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.stream import StreamSpec

from .browser import STATIC, WAIT_MS

ORDERS_SCHEMA = StructType([
    StructField("windowStart", TimestampType()), StructField("windowEnd", TimestampType()),
    StructField("region", StringType()), StructField("orders", LongType()),
    StructField("revenue", DecimalType(22, 2)), StructField("largestOrder", DecimalType(12, 2)),
    StructField("note", StringType()),
])
ORDERS_SPEC = StreamSpec(stream="orders", key="region", mode="update", id_from=("windowEnd", "region"),
                         event_time="windowEnd", window=("windowStart", "windowEnd"),
                         value_fields=("revenue", "orders", "largestOrder", "note"), title="Revenue per region",
                         units={"revenue": "EUR", "largestOrder": "EUR"})


@pytest.fixture(scope="module")
def page(browser: Browser) -> Iterator[Page]:
    """A page with dashboard.js imported as ``window.d``, in a browser whose time zone is Berlin's (UTC+1 in
    November): the axis labels are the browser's local time."""
    context = browser.new_context(timezone_id="Europe/Berlin")
    context.route("http://sparkwire.test/static/*", lambda route: route.fulfill(
        path=STATIC / route.request.url.rsplit("/", 1)[1], content_type="text/javascript"))
    context.route("http://sparkwire.test/", lambda route: route.fulfill(content_type="text/html", body="""
        <script type="module">import * as d from "/static/dashboard.js"; window.d = d;</script>"""))
    page = context.new_page()
    page.goto("http://sparkwire.test/")
    page.wait_for_function("window.d !== undefined", timeout=WAIT_MS)
    yield page
    context.close()


def js(page: Page, body: str, arg: object = None) -> Any:
    return page.evaluate(f"arg => {{ const d = window.d; {body} }}", arg)


def test_values(page: Page) -> None:
    times = js(page, """return ["2026-11-24T10:00:10.000000Z", "2026-11-24T10:00:10.123456Z", 1700000000000,
      "2024-02-29", "2024-02-29T01:00:00+01:00", "2026-11-24T10:00:10.500000", "eu-west", null, "NaN"]
      .map(d.parseTime);""")
    base = 1_795_514_410_000
    assert times == [base, base + 123.456, 1_700_000_000_000, 1_709_164_800_000, 1_709_164_800_000, base + 500,
                     None, None, None]
    numbers = js(page, """return ["19.90", "-0.05", "1234567890123.45", 7, 2.5, "NaN", "Infinity",
      "-Infinity", "eu", "", null, true].map(d.parseNumber);""")
    assert numbers == [19.9, -0.05, 1234567890123.45, 7, 2.5, None, None, None, None, None, None, None]


def test_layouts_from_the_writers_descriptors(page: Page) -> None:
    metrics = metrics_spec("metrics").descriptor(WINDOW_SCHEMA, "available")
    orders = json.loads(json.dumps(ORDERS_SPEC.descriptor(ORDERS_SCHEMA, "available")))
    result = js(page, """const [m, o] = arg.map(d.layoutFromDescriptor);
      const keep = (l) => ({ source: l.source, eventTime: l.eventTime, window: l.window, kinds: l.kinds,
                             numeric: l.numericFields, text: l.textFields, revisions: l.revisions, units: l.units });
      return { m: keep(m), o: keep(o), mSeries: d.chartSeries(m), builtIn: d.chartSeries(d.METRICS_LAYOUT),
               oSeries: d.chartSeries(o), builtInKinds: d.METRICS_LAYOUT.kinds,
               bad: [null, {}, { version: 2, valueFields: [] }, { version: 1, valueFields: [3] },
                     { version: 1, valueFields: [], window: ["a"] }].map(d.layoutFromDescriptor) };""",
                [metrics, orders])
    assert result["m"] == {"source": "descriptor", "eventTime": "windowEnd", "window": ["windowStart", "windowEnd"],
                           "kinds": {"avg": "number", "min": "number", "max": "number", "count": "integer"},
                           "numeric": ["avg", "min", "max", "count"], "text": [], "revisions": False, "units": {}}
    # The metrics stream drawn from its descriptor looks as the built-in layout does: count bars, avg in a band.
    assert result["mSeries"] == result["builtIn"]
    assert result["builtInKinds"] == result["m"]["kinds"]
    assert [(s["field"], s["kind"], s["role"]) for s in result["mSeries"]["series"]] == [
        ("count", "bar", "bar"), ("avg", "line", "primary"), ("min", "line", "edge"), ("max", "line", "edge")]
    assert result["mSeries"]["band"] == ["max", "min"]
    assert result["o"] == {"source": "descriptor", "eventTime": "windowEnd", "window": ["windowStart", "windowEnd"],
                           "kinds": {"revenue": "decimal", "orders": "integer", "largestOrder": "decimal",
                                     "note": "text"},
                           "numeric": ["revenue", "orders", "largestOrder"], "text": ["note"], "revisions": True,
                           "units": {"revenue": "EUR", "largestOrder": "EUR"}}
    assert [(s["field"], s["kind"], s["unit"]) for s in result["oSeries"]["series"]] == [
        ("orders", "bar", ""), ("revenue", "line", "EUR"), ("largestOrder", "line", "EUR")]
    assert result["oSeries"]["band"] is None
    assert result["bad"] == [None] * 5


def test_each_line_field_gets_a_chart_of_its_own(page: Page) -> None:
    """Fields of different sizes never share an axis: a chart per line field, the min/max band and the count
    bars with the first."""
    orders = json.loads(json.dumps(ORDERS_SPEC.descriptor(ORDERS_SCHEMA, "available")))
    result = js(page, """const fields = (l) => d.chartPanels(l).map((p) => [p.series.map((s) => s.field), p.band]);
      return { metrics: fields(d.METRICS_LAYOUT), orders: fields(d.layoutFromDescriptor(arg)),
               ints: fields(d.inferLayout({ processingId: "p", ts: 1, a: 1, b: 2 }, "p")),
               none: fields(d.inferLayout({ processingId: "p", ts: 1, note: "x" }, "p")) };""", orders)
    assert result["metrics"] == [[["count", "avg", "min", "max"], ["max", "min"]]]
    assert result["orders"] == [[["orders", "revenue"], None], [["largestOrder"], None]]
    assert result["ints"] == [[["a"], None], [["b"], None]]
    assert result["none"] == []


def test_inferred_layouts(page: Page) -> None:
    result = js(page, """return {
      metrics: d.inferLayout({ processingId: "p", metricName: "cpu", windowStart: 0, windowEnd: 10000, count: 3,
                               sum: 6, avg: 2, min: 1, max: 3 }, "p") === d.METRICS_LAYOUT,
      update: d.inferLayout({ processingId: "p", revision: 7, windowStart: "2026-11-24T10:00:00.000000Z",
                              windowEnd: "2026-11-24T10:00:10.000000Z", region: "eu", orders: 3, revenue: "9.90",
                              share: 0.5 }, "p@7"),
      append: d.inferLayout({ processingId: "p", revision: 7, ts: 1700000000000, n: 1 }, "p"),
      counts: d.chartSeries(d.inferLayout({ processingId: "p", ts: 1, a: 1, b: 2 }, "p")).series.map((s) => s.kind),
      none: d.inferLayout("text", "p"),
    };""")
    assert result["metrics"] is True
    update = result["update"]
    assert (update["source"], update["mode"], update["revisions"], update["eventTime"], update["window"]) == (
        "inferred", "update", True, "windowEnd", ["windowStart", "windowEnd"])
    assert update["valueFields"] == ["orders", "share"]  # decimals are strings: not guessed as numbers
    append = result["append"]
    assert (append["revisions"], append["eventTime"], append["valueFields"]) == (False, "ts", ["revision", "n"])
    assert result["counts"] == ["line", "line"]  # only integer fields: lines, not bars alone
    assert result["none"] is None


def test_the_history_keeps_the_newest_revision_of_each_result(page: Page) -> None:
    descriptor = json.loads(json.dumps(ORDERS_SPEC.descriptor(ORDERS_SCHEMA, "available")))
    result = js(page, """
      const layout = d.layoutFromDescriptor(arg);
      const h = new d.ResultHistory(3, layout);
      const row = (w, rev, revenue) => ({ windowStart: `2026-11-24T10:00:${String(w * 5).padStart(2, "0")}.000000Z`,
        windowEnd: `2026-11-24T10:00:${String(w * 5 + 10).padStart(2, "0")}.000000Z`, region: "eu", orders: rev,
        revenue, largestOrder: "1.00", note: `n${rev}`, processingId: `w${w}`, revision: rev });
      const put = (w, rev, revenue = `${rev}.50`) => h.put("eu", `w${w}@${rev}`, row(w, rev, revenue));
      const outcomes = [put(0, 1), put(0, 2), put(0, 1), put(0, 2), put(1, 2), put(1, 3, "NaN"), put(2, 3), put(3, 4),
                        h.put("eu", "x", null), h.put(null, "x", row(9, 9, "1"))];
      return { outcomes, counts: [h.added, h.replaced, h.revised, h.stale, h.dropped],
               ids: h.sorted("eu").map((p) => [p.processingId, p.revision, p.revenue]),
               columns: h.columns("eu", ["orders", "revenue"]), latest: h.latest("eu").processingId,
               size: h.size(), saved: h.save({ epoch: "e", seq: 9 }) };""", descriptor)
    assert result["outcomes"] == ["added", "revised", "stale", "replaced", "added", "revised", "added", "added",
                                  "ignored", "ignored"]
    assert result["counts"] == [4, 1, 2, 1, 1]  # window 0 dropped: 3 results per key at most
    assert result["ids"] == [["w1", 3, "NaN"], ["w2", 3, "3.50"], ["w3", 4, "4.50"]]
    start = 1_795_514_400
    assert result["columns"] == [[start + 15, start + 20, start + 25], [3, 3, 4], [None, 3.5, 4.5]]
    assert (result["latest"], result["size"]) == ("w3", 3)
    saved = result["saved"]
    assert (saved["v"], saved["throughSeq"], saved["fields"]) == (
        2, 9, ["windowEnd", "windowStart", "revenue", "orders", "largestOrder", "note"])
    assert saved["keys"]["eu"][0][:2] == ["w1", 3]


def test_save_and_restore(page: Page) -> None:
    result = js(page, """
      const h = new d.ResultHistory(100, null);  // no descriptor: inferred from the first result
      h.reset("e");
      const row = (w, rev) => ({ processingId: `w${w}`, revision: rev, windowEnd: `2026-11-24T10:00:${w}0.000000Z`,
                                 n: rev * 2 });
      for (const [w, rev] of [[1, 1], [1, 2], [2, 2]]) h.put(`k${w}`, `w${w}@${rev}`, row(w, rev));
      const saved = JSON.parse(JSON.stringify(h.save({ epoch: "e", seq: 5 })));
      const again = new d.ResultHistory(100, null);
      const restored = again.restore(saved, { epoch: "e", seq: 5 });
      const stale = again.put("k1", "w1@1", row(1, 1));  // the saved revision is kept
      const refused = [new d.ResultHistory(100).restore(saved, { epoch: "e", seq: 6 }),
                       new d.ResultHistory(100).restore(saved, { epoch: "f", seq: 1 }),
                       new d.ResultHistory(100).restore(null, { epoch: "e", seq: 1 })];
      const v1 = { v: 1, epoch: "e", throughSeq: 3, metrics: { cpu: [["p1", 0, 10000, 4, 2.5, 1, 3]] } };
      const old = new d.ResultHistory(100, null);
      return { restored, same: JSON.stringify(again.toObject()) === JSON.stringify(h.toObject()),
               layout: again.layout.source, revisions: again.layout.revisions, stale, refused,
               v1: old.restore(v1, { epoch: "e", seq: 3 }), v1Layout: old.layout === d.METRICS_LAYOUT,
               v1Series: old.toObject(), counts: [old.added, old.replaced] };""")
    assert (result["restored"], result["same"], result["layout"], result["revisions"]) == (True, True, "inferred", True)
    assert result["stale"] == "stale"
    assert result["refused"] == [False, False, False]
    assert (result["v1"], result["v1Layout"], result["counts"]) == (True, True, [0, 0])
    assert result["v1Series"] == {"cpu": [{"processingId": "p1", "windowEnd": 10000, "windowStart": 0, "avg": 2.5,
                                           "min": 1, "max": 3, "count": 4, "x": 10000}]}


WINDOW_STRUCT = StructType([StructField("start", TimestampType()), StructField("end", TimestampType())])
VIEWS_SCHEMA = StructType([StructField("window", WINDOW_STRUCT), StructField("country", StringType()),
                           StructField("views", LongType())])
# A team's query as the issue wrote it: grouped by Spark's window struct column, window="window".
VIEWS_SPEC = StreamSpec(stream="views", key="country", mode="update", id_from=("window", "country"), window="window",
                        title="Page views")


def test_a_window_struct_columns_fields_are_read_by_their_dotted_names(page: Page) -> None:
    descriptor = json.loads(json.dumps(VIEWS_SPEC.descriptor(VIEWS_SCHEMA, "available")))
    assert descriptor["window"] == ["window.start", "window.end"]
    minute = 60_000_000  # timestamps in microseconds, as Spark collects them
    start = 1_795_514_400 * 1_000_000  # 2026-11-24 10:00:00 UTC
    rows = [{"window": {"start": start + n * minute, "end": start + (n + 1) * minute}, "country": "de", "views": n + 7}
            for n in range(2)]
    records = ResultEncoder(VIEWS_SPEC, VIEWS_SCHEMA).encode(rows, revision=3).records
    entries = [[record.key, record.processing_id, json.loads(record.payload)] for record in records]
    assert entries[0][2]["window"] == {"start": "2026-11-24T10:00:00.000000Z", "end": "2026-11-24T10:01:00.000000Z"}
    result = js(page, """
      const l = d.layoutFromDescriptor(arg.descriptor);
      const h = new d.ResultHistory(100, l);
      h.reset("e");
      const outcomes = arg.entries.map(([key, id, data]) => h.put(key, id, data));
      const points = h.sorted("de");
      const saved = JSON.parse(JSON.stringify(h.save({ epoch: "e", seq: 2 })));
      const again = new d.ResultHistory(100, null);
      const restored = again.restore(saved, { epoch: "e", seq: 2 });
      const data = arg.entries[0][2];
      return { window: l.window, fields: d.pointFields(l), outcomes,
               bounds: points.map((p) => [p["window.start"], p["window.end"], p.views]),
               windowS: points.map((p) => d.windowSeconds(l, p)), restored, x: points.map((p) => p.x),
               latest: h.latest("de").views,
               restoredWindowS: again.sorted("de").map((p) => d.windowSeconds(again.layout, p)),
               same: JSON.stringify(again.toObject()) === JSON.stringify(h.toObject()),
               values: [d.fieldValue(data, "window.end"), d.fieldValue(data, "window"),
                        d.fieldValue({ "window.end": 1, window: { end: 2 } }, "window.end"),
                        d.fieldValue(data, "window.end.x"), d.fieldValue(data, "window.middle"),
                        d.fieldValue(data, "constructor"), d.fieldValue(data, "window.constructor"),
                        d.fieldValue(null, "window.end"), d.fieldValue(data, "")] };""",
                {"descriptor": descriptor, "entries": entries})
    assert result["window"] == ["window.start", "window.end"]
    assert result["fields"] == ["window.start", "window.end", "views"]
    assert result["outcomes"] == ["added", "added"]
    assert result["bounds"] == [["2026-11-24T10:00:00.000000Z", "2026-11-24T10:01:00.000000Z", 7],
                                ["2026-11-24T10:01:00.000000Z", "2026-11-24T10:02:00.000000Z", 8]]
    assert result["windowS"] == [60, 60]  # null before: the page looked "window.start" up as a top-level key
    # No event time: the window's end orders the points, so the card's latest result is the newest window.
    assert (result["x"], result["latest"]) == ([1_795_514_460_000, 1_795_514_520_000], 8)
    # The saved history keeps the bounds flat under the dotted names; restored, they are found as keys.
    assert (result["restored"], result["restoredWindowS"], result["same"]) == (True, [60, 60], True)
    # undefined (JSON null) for a path that is not there; a key with a dot in its name wins over the path.
    assert result["values"] == ["2026-11-24T10:01:00.000000Z",
                                {"start": "2026-11-24T10:00:00.000000Z", "end": "2026-11-24T10:01:00.000000Z"},
                                1, None, None, None, None, None, None]


def test_history_load_gives_every_key_a_card_and_the_axis_is_padded(page: Page) -> None:
    result = js(page, """
      const h = new d.ResultHistory(100, d.METRICS_LAYOUT);
      const w = (m, end) => ({ processingId: `${m}-${end}`, metricName: m, windowStart: end - 10000, windowEnd: end,
                               count: 1, avg: 1, min: 1, max: 1 });
      const entry = (seq, m, end) => ({ seq, key: m, processingId: `${m}-${end}`, data: w(m, end) });
      const loaded = h.load({ epoch: "e", seq: 3, entries: [entry(2, "a", 20000), entry(3, "a", 30000)],
                              items: { a: { seq: 3, processingId: "a-30000", data: w("a", 30000) },
                                       b: { seq: 1, processingId: "b-10000", data: w("b", 10000) } } });
      return { loaded, keys: [...h.results.keys()], counts: [h.added, h.replaced],
               one: d.xRange([10], 10, 10, 10), two: d.xRange([10, 20], 10, 20, 10),
               wide: d.xRange([10, 200], 10, 200, 10), zoom: d.xRange([10, 200], 50, 100, 10),
               noWindow: d.xRange([10], 10, 10, 0),
               windowS: d.windowSeconds(d.METRICS_LAYOUT, h.latest("a")) };""")
    assert (result["loaded"], result["keys"], result["counts"]) == (3, ["a", "b"], [0, 0])
    assert result["one"] == [-20, 40] and result["two"] == [-15, 45] and result["wide"] == [10, 200]
    assert result["zoom"] == [50, 100] and result["noWindow"] == [-170, 190]
    assert result["windowS"] == 10


def test_time_axis_labels_are_one_line_of_local_time(page: Page) -> None:
    base = 1_795_514_410  # 2026-11-24 10:00:10 UTC, 11:00:10 in Berlin
    ticks = js(page, "return [arg.s.map((s) => d.timeTicks(s, arg.incr[0])), d.timeTicks(arg.m, 60), "
                     "d.timeTicks(arg.m, 86400), d.timeTicks(arg.sub, 0.5)];",
               {"s": [[base + 40, base + 50, base + 60, base + 70], [base + 50, base + 60]], "incr": [10],
                "m": [base + 50, base + 110], "sub": [base, base + 0.5]})
    assert ticks == [
        [["11:00:50", "11:01", ":10", ":20"], ["11:01", ":10"]],
        ["11:01", "11:02"],
        ["2026-11-24", "2026-11-24"],
        ["11:00:10.0", ":10.5"],
    ]
