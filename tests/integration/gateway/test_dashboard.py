"""The live dashboard (``static/index.html``) in real Chromium against a real gateway and Redis: window results
committed through the real commit script are drawn one point per window, exactly once, through a SIGKILLed
gateway, a reload that replays windows already drawn and a reload answered with a snapshot of them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis as redis_lib
from playwright.sync_api import Browser, Page

from sparkwire.aggregator.job import window_record
from sparkwire.replaylog import Record, ReplayLogReader
from sparkwire_harness.stack import Committer, GatewayProcess
from sparkwire_harness.verify.expected import WindowResult, expected_results

from .browser import WAIT_MS, wait_js

METRICS = ["checkout.latency_ms", "api.requests", "queue.depth"]
WINDOW_MS = 10_000
DELAY_MS = 5_000
WINDOWS = 18  # closed windows per metric; the events run one window further so the watermark closes them
REPLAY_FROM_SEQ = 6  # the stale cursor of the first reload: every window after it comes a second time
# Rewrites the saved positions before the page's own scripts run, when the test asked for it: what a
# stale tab, or a Redis that lost its tail, leaves behind.
TAMPER = """
(() => {
  const order = localStorage.getItem("dashboard-test:tamper");
  if (order === null) return;
  localStorage.removeItem("dashboard-test:tamper");
  const { stream, clientSeq, clientDigest, historySeq } = JSON.parse(order);
  const saved = JSON.parse(localStorage.getItem("sparkwire:" + stream));
  saved.seq = clientSeq;
  if (clientDigest !== null) saved.digest = clientDigest;  // the entry's at that seq, as a stale tab has it
  localStorage.setItem("sparkwire:" + stream, JSON.stringify(saved));
  if (historySeq !== null) {
    const history = JSON.parse(localStorage.getItem("sparkwire-dashboard:" + stream));
    history.throughSeq = historySeq;
    localStorage.setItem("sparkwire-dashboard:" + stream, JSON.stringify(history));
  }
})();
"""
CHARTS_DRAWN = """() => Object.fromEntries(Object.entries(window.__sparkwire.charts).map(([metric, chart]) => {
  const canvas = chart.root.querySelector("canvas");
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted += 1;
  return [metric, { windowEnds: chart.data[0].map((s) => Math.round(s * 1000)), painted,
                    pixels: canvas.width * canvas.height }];
}))"""


def raw_events(seed: int) -> list[str]:
    """Every metric in every window (a few events each), in event-time order so that none is late, every
    tenth sent twice (a producer retry: dedup by eventId keeps it once)."""
    rng = random.Random(seed)
    base = 1_700_000_000_000 - 1_700_000_000_000 % WINDOW_MS
    events: list[tuple[int, str]] = []  # (event time, the record)
    for window in range(WINDOWS + 1):
        for index, metric in enumerate(METRICS):
            level = 50 * (index + 1)
            for n in range(rng.randint(3, 9)):
                timestamp = base + window * WINDOW_MS + rng.randrange(WINDOW_MS)
                events.append((timestamp, json.dumps({
                    "timestamp": timestamp, "metricName": metric, "value": round(level + rng.gauss(0, level / 5), 3),
                    "sourceId": f"src-{n % 3}", "eventId": f"{metric}-{window}-{n}"})))
    events.sort()
    return [raw for i, (_, raw) in enumerate(events) for _ in range(2 if i % 10 == 0 else 1)]


class WindowCommitter(Committer):
    """The commit script fed with window results, one batch per window end (all metrics), in the
    aggregator's payload format — as Spark's append mode emits them when the watermark passes."""

    def __init__(self, client: redis_lib.Redis, stream: str, results: list[WindowResult]) -> None:
        super().__init__(client, stream, per_batch=len(METRICS))
        self.results = sorted(results, key=lambda r: (r.window_end, r.metric))

    def _record(self, n: int) -> Record:
        result = self.results[n]
        return window_record({"processingId": result.processing_id, "metricName": result.metric,
                              "windowStart": result.window_start, "windowEnd": result.window_end,
                              "count": result.count, "sum": result.total, "min": result.minimum,
                              "max": result.maximum, "avg": result.average})








def tamper_on_next_load(page: Page, stream: str, client_seq: int, history_seq: int | None,
                        client_digest: str | None = None) -> None:
    """``client_digest``: the digest of the log's entry at ``client_seq`` (a stale tab saved both); None
    leaves the saved digest as it was (a cursor ahead of the log has no entry to match)."""
    order = {"stream": stream, "clientSeq": client_seq, "clientDigest": client_digest, "historySeq": history_seq}
    page.evaluate("order => localStorage.setItem('dashboard-test:tamper', order)", json.dumps(order))


def reload(page: Page) -> None:
    page.reload()  # pagehide stops the client: a last ack, and the client's and the history's save with it
    wait_js(page, "c.stats().connects >= 1")


def series(page: Page) -> dict[str, list[dict[str, Any]]]:
    return dict(page.evaluate("window.__sparkwire.series"))


def test_the_dashboard_draws_each_window_once_through_a_sigkill_a_replay_and_a_snapshot(
    browser: Browser, console: list[str], gateway: GatewayProcess, redis: redis_lib.Redis, unique_name: str,
) -> None:
    expected = expected_results(raw_events(seed=11), WINDOW_MS, DELAY_MS)
    committer = WindowCommitter(redis, unique_name, list(expected.values()))
    assert len(committer.results) == WINDOWS * len(METRICS)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(TAMPER)
    page = context.new_page()
    page.on("console", lambda message: console.append(f"[{message.type}] {message.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.goto(f"{gateway.http}/?stream={unique_name}&maxDelayMs=1000")
    wait_js(page, "c.stats().connects >= 1")

    committer.commit(6)  # windows 1..6 of every metric: seqs 1..18
    wait_js(page, "c.lastSeq >= arg", 18)
    gateway.process.kill()  # SIGKILL: no close frame; the page retries with backoff
    committer.commit(4)  # seqs 19..30, committed while no gateway runs
    gateway.start()  # same port
    wait_js(page, "c.lastSeq >= arg", 30)
    assert page.evaluate("window.__sparkwire.chartStats") == {"added": 30, "replaced": 0, "revised": 0, "stale": 0,
                                                               "dropped": 0}

    # A reload whose saved cursor is stale: the gateway replays seqs 7..30, windows the page drew already.
    stale = ReplayLogReader(redis, unique_name).read_after(REPLAY_FROM_SEQ - 1, 1)[0]
    tamper_on_next_load(page, unique_name, REPLAY_FROM_SEQ, None, stale.digest)
    reload(page)
    wait_js(page, "c.lastSeq >= arg", 30)
    assert page.evaluate("window.__sparkwire.historyRestored") is True
    assert page.evaluate("window.__sparkwire.chartStats") == {"added": 0, "replaced": 30 - REPLAY_FROM_SEQ,
                                                               "revised": 0, "stale": 0, "dropped": 0}
    committer.commit(4)  # seqs 31..42
    wait_js(page, "c.lastSeq >= arg", 42)

    # A reload whose saved position is ahead of the log (a Redis that lost its tail): a snapshot of the
    # latest window per metric — drawn already — then the windows after it.
    tamper_on_next_load(page, unique_name, 10_000, 10_000)
    reload(page)
    wait_js(page, "d.snapshots.some((s) => s.reason === 'cursor_ahead')")
    committer.commit(WINDOWS - 14)  # the rest: seqs 43..54
    total = WINDOWS * len(METRICS)
    wait_js(page, "c.lastSeq >= arg", total)

    # What the page holds: per metric, exactly the windows computed from the events, each once.
    log = list(ReplayLogReader(redis, unique_name).iter_all())
    assert [entry.seq for entry in log] == list(range(1, total + 1))
    drawn = series(page)
    assert sorted(drawn) == sorted(METRICS)
    for metric in METRICS:
        want = sorted((r for r in expected.values() if r.metric == metric), key=lambda r: r.window_end)
        points = drawn[metric]
        assert len(points) == WINDOWS, f"{metric}: {len(points)} points for {WINDOWS} windows"
        assert len({p["processingId"] for p in points}) == len(points), f"{metric}: a window drawn twice"
        assert [p["windowEnd"] for p in points] == [r.window_end for r in want]
        assert [p["processingId"] for p in points] == [r.processing_id for r in want]
        for point, result in zip(points, want, strict=True):
            assert point["count"] == result.count
            assert (point["min"], point["max"]) == (result.minimum, result.maximum)
            assert point["avg"] == pytest.approx(result.average)

    # What the charts show: the same windows, rendered (not just held).
    page.wait_for_function("n => Object.values(window.__sparkwire.charts).every((c) => c.data[0].length === n)"
                           " && Object.keys(window.__sparkwire.charts).length === 3", arg=WINDOWS, timeout=WAIT_MS)
    page.wait_for_timeout(100)  # the frame after setData paints the canvas
    charts = page.evaluate(CHARTS_DRAWN)
    assert sorted(charts) == sorted(METRICS)
    for metric, chart in charts.items():
        assert chart["windowEnds"] == [p["windowEnd"] for p in drawn[metric]], metric
        assert chart["painted"] > chart["pixels"] // 100, f"{metric}: the canvas is (nearly) blank: {chart}"
    assert page.locator("#charts .card canvas").count() >= len(METRICS)
    assert page.evaluate("window.__sparkwire.chartError") is None

    stats = page.evaluate("window.__sparkwire.client.stats()")
    assert (stats["gaps"], stats["terminal"]) == (0, None), stats
    assert page.evaluate("window.__sparkwire.chartStats")["added"] == total - 42
    snapshots = page.evaluate("window.__sparkwire.snapshots")
    assert [s["reason"] for s in snapshots] == ["restored", "cursor_ahead"], snapshots
    assert snapshots[-1]["keys"] == len(METRICS)
    assert page.locator("#windows").inner_text() == str(total)
    context.close()
