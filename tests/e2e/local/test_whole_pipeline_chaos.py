"""``sparkwire-harness chaos``, short: the whole pipeline (producer, Kafka, Spark, Redis, three gateways behind
nginx, 50 Python clients and the dashboard in Chromium, and the orders example's job with its own clients)
under the seeded fault schedule of every kind — driver, gateway, Redis and Kafka kills, toxiproxy faults on
every link, frozen and returning clients — and every client's render checked against results computed from
the produced events, every orders revision against the produced orders, every entry of the real-time
large-orders feed (read from the same orders) against its own oracle. One client in ten of each stream is
filtered or holds a scoped token, and is checked against its own oracle: those results filtered by the
harness's own reading of its view."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sparkwire_harness.chaos.views import METRIC_PROFILES, ORDER_PROFILES

pytestmark = pytest.mark.slow

MINUTES = 2
CLIENTS = 50
SEED = 7
# What the chaos output says when something went wrong (run.py, orders.py, large_orders.py, recovery.py): a
# failure message leads with these lines, wherever they are in a long output, not with its cut tail.
PROBLEM_MARKERS = ("FAIL", "problem: ", "gave up waiting", "could not be applied", "did not read every",
                   "orders client ", "not recovered in the run", "Traceback (most recent call last)", "logs kept in ")


def failure(run: subprocess.CompletedProcess[str], seconds: float) -> str:
    """The run's verdict, exit status and duration first (make test's summary shows a message's first line),
    then every line reporting a problem, then the last lines of stdout and stderr."""
    out = run.stdout.strip().splitlines()
    verdict = next((line for line in reversed(out) if line.startswith(("FAIL", "OK exactly once"))),
                   out[-1] if out else "(no output)")
    flagged = [line[:400] for line in (run.stdout + run.stderr).splitlines()
               if line != verdict and any(marker in line for marker in PROBLEM_MARKERS)]
    return "\n".join([f"{verdict[:300]} (exit {run.returncode}, {seconds:.0f} s)", *flagged[:40],
                      "--- stdout's last lines:", *out[-12:],
                      "--- stderr's last lines:", *run.stderr.strip().splitlines()[-30:]])


def test_a_short_chaos_run_delivers_every_result_and_every_own_query_revision_exactly_once() -> None:
    started = time.monotonic()
    scratch_before = set(Path(tempfile.gettempdir()).glob("spark-*"))
    run = subprocess.run(
        [sys.executable, "-m", "sparkwire_harness", "chaos", "--minutes", str(MINUTES), "--seed", str(SEED),
         "--clients", str(CLIENTS), "--client-processes", "2"],
        capture_output=True, text=True, timeout=600, check=False,
    )
    output = run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    took = time.monotonic() - started
    assert run.returncode == 0 and last.startswith("OK exactly once: "), failure(run, took)
    # The SIGKILLed drivers' scratch directories went with the run's directory, not into /tmp for good.
    left = set(Path(tempfile.gettempdir()).glob("spark-*")) - scratch_before
    assert not left, f"Spark scratch directories left in {tempfile.gettempdir()}: {sorted(map(str, left))}"
    # Every category of fault hit this run, and every client (the page too) was counted.
    match = re.fullmatch(r"OK exactly once: (\d+) clients x ([\d,]+) results, (\d+) faults \((.*)\), "
                         r"0 duplicates, 0 gaps, 0 lost, 0 contradictions", last)
    assert match is not None, last
    assert int(match[1]) == CLIENTS + 1 and int(match[2].replace(",", "")) > 100
    # On the replicated topology (the default): Redis failovers and Kafka leader losses, both ways each.
    assert {part.split()[0] for part in match[4].split(", ")} == {"driver", "gateway", "redis-failover",
                                                                  "kafka-leader", "net", "client"}
    for kind in ("redis-failover", "kafka-leader"):
        assert re.search(rf"injected at .*{kind} \S+ for .*\(partition=0\)", output), f"no {kind} crash"
        assert re.search(rf"injected at .*{kind} \S+ for .*\(partition=1\)", output), f"no {kind} cut"
    assert "could not be applied" not in output
    # The orders example (a team's own query, update mode) ran under the same faults, its driver killed too.
    orders = re.search(r"\[chaos\] orders: (\d+) orders, (\d+) revisions in the log over \d+ batches, 0 wrong",
                       output)
    assert orders is not None and int(orders[1]) > 500 and int(orders[2]) > 50, failure(run, took)
    assert "orders client" not in output and "orders problem" not in output
    # The large-orders feed (Spark's real-time mode, through the relay topic) under the same faults: its log is
    # its oracle's exactly once, each of its clients (cursor and session resumes among them) got every entry
    # once in seq order, and the rows its killed driver sent again were refused.
    large = re.search(r"\[chaos\] large-orders \(real-time\): OK exactly once, (\d+) entries, (\d+) re-sent rows "
                      r"refused; (\d+) clients", output)
    assert large is not None, failure(run, took)
    assert int(large[1]) > 200 and int(large[2]) > 0 and int(large[3]) == 4, large[0]
    # Filtered and scoped clients (one in ten, every profile once here), each OK against its own oracle, some
    # of them through a cursor resume and a session resume; on the orders stream, with removals.
    filtered = re.findall(r"\[chaos\] filtered client \d+ \((\w+), edge-\d, ([\w+]+)\): (OK exactly once, ([\d,]+))?",
                          output)
    assert len(filtered) == len(METRIC_PROFILES) and all(ok for _, _, ok, _ in filtered), failure(run, took)
    assert {name for _, name, _, _ in filtered} == {p.name for p in METRIC_PROFILES}
    assert {kind for kind, _, _, _ in filtered} >= {"cursor", "session"}
    assert sum(int(n.replace(",", "")) for _, _, _, n in filtered) > 100
    ordered = re.findall(r"\[chaos\] orders filtered client \d+ \(([\w+]+)\): OK exactly once, (\d+) revisions and "
                         r"(\d+) removals", output)
    assert {name for name, _, _ in ordered} == {p.name for p in ORDER_PROFILES}, failure(run, took)
    assert all(int(revisions) > 0 for _, revisions, _ in ordered)
    assert any(int(removals) > 0 for _, _, removals in ordered)
    print(f"{last} ({time.monotonic() - started:.0f} s)")
