"""The dashboard page (``/`` of a gateway, through an edge proxy and nginx) in real Chromium for the whole
run: ``python -m sparkwire_harness.chaos.browser PLAN``. It writes the page client's seq twice a second to
``status``, reloads the page when the schedule says (the page resumes from what it saved), and on
SIGTERM writes to ``report`` what the page drew — ``window.__sparkwire.series``, one point per window —
with the client's counters and every applied (seq, processingId) of every page life.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from sparkwire_harness.chaos.clients import write_json

CHROMIUM = "/usr/bin/chromium"  # Debian's, from `make setup`
STATE = """() => { const d = window.__sparkwire; const c = d?.client;
  return c ? { seq: c.cursor?.seq ?? 0, connects: c.stats().connects } : { seq: 0, connects: 0 }; }"""
# Each page life's applied entries, kept in sessionStorage when the page goes away: a listener added
# before the page's own scripts runs first on pagehide, before the client's last ack and save, and no
# frame can be handled in between — reading them from outside before the reload would miss what the
# page applied in the meantime and then saved as its position.
KEEP_LIVES = """addEventListener("pagehide", () => {
  const lives = JSON.parse(sessionStorage.getItem("chaos:lives") || "[]");
  lives.push(window.__sparkwire?.received ?? []);
  sessionStorage.setItem("chaos:lives", JSON.stringify(lives));
});"""
FINAL = """() => { const d = window.__sparkwire;
  const earlier = JSON.parse(sessionStorage.getItem("chaos:lives") || "[]");
  return { series: d.series, lives: [...earlier, d.received], stats: d.client.stats(), chartStats: d.chartStats,
           snapshots: d.snapshots, chartError: d.chartError }; }"""


def _state(page: Page) -> dict[str, Any]:
    try:
        return dict(page.evaluate(STATE))
    except Exception:  # between two page lives
        return {"seq": -1, "connects": 0}


def _load(page: Page, url: str, *, reload: bool) -> None:
    """Load (or reload) the page, trying again for a minute as a user would: a load can meet a reset link
    or nginx with no gateway up. pagehide — the client's last ack and save — ran at the first attempt."""
    for attempt in range(60):
        try:
            page.reload() if reload and attempt == 0 else page.goto(url)
            return
        except PlaywrightError:
            time.sleep(1.0)
    page.goto(url)


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    status_path, report_path = Path(plan["status"]), Path(plan["report"])
    stopping = False

    def on_term(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    reloads = sorted(plan["t0"] + at for at in plan["reloads"])
    console: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        context = browser.new_context()
        context.add_init_script(KEEP_LIVES)
        page = context.new_page()
        page.on("console", lambda message: console.append(f"[{message.type}] {message.text}")
                if message.type in ("error", "warning") else None)
        page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
        _load(page, plan["url"], reload=False)
        while not stopping:
            if reloads and time.time() >= reloads[0]:
                reloads.pop(0)
                write_json(status_path, {"t": time.time(), "seqs": {"page": -1}, "connected": 0})
                _load(page, plan["url"], reload=True)
            state = _state(page)
            write_json(status_path, {"t": time.time(), "seqs": {"page": state["seq"]},
                                     "connected": int(state["connects"] > 0)})
            page.wait_for_timeout(500)
        final = dict(page.evaluate(FINAL))
        final["console"] = console[-50:]
        write_json(report_path, final)
        browser.close()


if __name__ == "__main__":
    main()
