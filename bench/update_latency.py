"""Update mode, event -> running value on the page: how soon after an order is sent does
the page draw a revision of its window that counts it.

The orders example (``sparkwire.examples.orders``: a team's own query, update mode, sliding windows of 10 s every
5 s, watermark delay 5 s, its default 1 s trigger) runs as ``make demo`` runs it, against a real Kafka broker and
``redis-server`` (AOF, ``appendfsync always``) started here. Once the job's first micro-batch is done, the
example's producer sends orders at wall-clock time (``ts`` = the time it sends each one; ~2 % sent twice, ~1 %
not orders) to a one-partition topic, and a gateway serves the stream to one ``StreamClient`` and to the
dashboard page in Chromium (``&record=1``: each frame's last drawn seq and time). Per order
(``_update_latency.first_shown``): the first revision of one of its windows counting it, and that revision's
commit time, the client's receive time and the page's first frame drawing it, minus the order's ``ts``. The
first ``--warmup-seconds`` of orders are left out (the driver's JIT is still cold there); every order after
them must be shown.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/update_latency.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import redis
from _common import emit_section, machine_info, markers, quantile, reproduce_lines
from _spark_rates import aggregate_batches
from _update_latency import Received, Shown, drawn_at, first_shown, spans
from playwright.sync_api import sync_playwright

from sparkwire.client.background import BackgroundClient
from sparkwire.examples.orders.produce import load_orders
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire_harness.stack import GatewayProcess, KafkaBroker, ManagedProcess, RedisServer

SECTION = "update_latency"
WINDOW_MS, SLIDE_MS, DELAY_MS, TRIGGER_MS = 10_000, 5_000, 5_000, 1_000  # the orders example's defaults
AIM_MS = 1_500
TOPIC = STREAM = "orders"
REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"  # Debian's, from `make setup`


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=100.0, help="orders per second")
    parser.add_argument("--seconds", type=float, default=45.0, help="how long orders are sent")
    parser.add_argument("--warmup-seconds", type=float, default=5.0, help="first orders left out of the figures")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md", help="'-' for stdout")
    return parser.parse_args(argv)


class Measured(NamedTuple):
    shown: list[Shown]  # by the client
    on_page: list[Shown]  # by the page
    batch_ms: list[int]  # the job's batch durations while orders flowed
    revisions: int
    info: dict[str, str]


def measure(args: argparse.Namespace, workdir: Path) -> Measured:
    received: list[Received] = []

    def on_entry(entry: ReceivedEntry) -> None:
        data = entry.data if isinstance(entry.data, dict) else {}
        received.append(Received(entry.seq, str(data.get("windowEnd")), str(data.get("region")),
                                 int(data.get("orders", 0)), entry.commit_ms, int(time.time() * 1000)))

    with (RedisServer(workdir / "redis") as redis_server, KafkaBroker(workdir / "kafka", quick_jit=False) as kafka,
          sync_playwright() as playwright):
        kafka.create_topic(TOPIC, partitions=1)  # Kafka order is the job's order: first_shown relies on it
        gateway = GatewayProcess(workdir, redis_server.url, [STREAM]).start()
        client = BackgroundClient(gateway.ws(STREAM), on_entry=on_entry).start()
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{gateway.http}/?stream={STREAM}&record=1")
        job = ManagedProcess("orders-job", [sys.executable, "-m", "sparkwire.examples.orders", "run"], workdir, env={
            "ORDERS_BOOTSTRAP_SERVERS": kafka.bootstrap, "ORDERS_TOPIC": TOPIC, "ORDERS_STREAM": STREAM,
            "ORDERS_REDIS_URL": redis_server.url, "ORDERS_CHECKPOINT": str(workdir / "checkpoint")})
        job.start()
        orders_file = workdir / "orders.jsonl"
        try:
            deadline = time.monotonic() + 120
            while not aggregate_batches(job.log_path.read_text(errors="replace").splitlines(), query=None):
                if not job.alive or time.monotonic() > deadline:
                    raise RuntimeError(f"the orders job ran no batch:\n{job.log_tail(40)}")
                time.sleep(0.5)
            first_batch = len(aggregate_batches(job.log_path.read_text(errors="replace").splitlines(), query=None))
            producer = ManagedProcess("orders-producer", [
                sys.executable, "-m", "sparkwire.examples.orders.produce", "--bootstrap-servers", kafka.bootstrap,
                "--topic", TOPIC, "--rate", str(args.rate), "--duration-ms", str(round(args.seconds * 1000)),
                "--orders-file", str(orders_file)], workdir)  # fmt: skip
            producer.start()
            while producer.alive:
                time.sleep(0.5)
            if producer.returncode != 0:
                raise RuntimeError(f"producer failed:\n{producer.log_tail(20)}")
            time.sleep(3 * TRIGGER_MS / 1000 + 2)  # the last orders' batch and its delivery
            frames = [(int(seq), int(ms)) for seq, ms in page.evaluate("window.__sparkwire.drawn")]
        finally:
            browser.close()
            client.stop()
            job.stop(timeout=30)
            gateway.stop()
        info = machine_info(redis.Redis.from_url(redis_server.url))
        batches = aggregate_batches(job.log_path.read_text(errors="replace").splitlines(), query=None)
        durations = [b.duration_ms for b in batches[first_batch:] if b.rows > 0]
    orders = load_orders(orders_file)
    start_ms = min(o.ts_ms for o in orders) + int(args.warmup_seconds * 1000)
    shown = [s for s in first_shown(orders, received, WINDOW_MS, SLIDE_MS) if s.ts_ms >= start_ms]
    on_page = [s for s in first_shown(orders, drawn_at(received, frames), WINDOW_MS, SLIDE_MS) if s.ts_ms >= start_ms]
    return Measured(shown, on_page, durations, len(received), info)


def _row(name: str, values: Sequence[int]) -> str:
    ordered = sorted(values)
    cells = " | ".join(f"{quantile(ordered, q):,.0f}" for q in (0.5, 0.9, 0.99, 1))
    return f"| {name} | {cells} |"


def render(*, args: argparse.Namespace, date: str, wall: float, command: str, measured: Measured) -> str:
    start, end = markers(SECTION)
    info, batch = measured.info, sorted(measured.batch_ms)
    missing = sum(1 for s in measured.shown if s.first is None)
    not_drawn = sum(1 for s in measured.on_page if s.first is None)
    to_commit, commit_to_client, to_client = spans(measured.shown)
    _, commit_to_page, to_page = spans(measured.on_page)
    p50 = quantile(sorted(to_page), 0.5)
    met = missing == 0 and not_drawn == 0 and p50 <= AIM_MS
    return "\n".join([
        start,
        "## Update mode: an order → its running value on the page",
        "",
        "The orders example (`sparkwire.examples.orders`: update mode, sliding windows of 10 s every 5 s, watermark "
        "delay 5 s, its default 1 s trigger) as `make demo` runs it, on this machine's real Kafka broker and "
        "`redis-server` (AOF, `appendfsync always`), a gateway, one `StreamClient` and the dashboard page in "
        "Chromium; generated by `bench/update_latency.py` (method in its docstring).",
        "",
        *reproduce_lines(date, wall, f"flock /tmp/sparkwire-heavy.lock {command}"),
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM; Redis {info['redis']}.",
        f"- Orders: {args.rate:,.0f}/s for {args.seconds:.0f} s at wall-clock time to a one-partition topic (each "
        f"order's `ts` is when it was sent); the first {args.warmup_seconds:.0f} s left out: "
        f"{len(measured.shown):,} orders measured, {measured.revisions:,} revisions received; orders never shown: "
        f"{missing} by the client, {not_drawn} by the page.",
        f"- The job's micro-batches meanwhile: {len(batch)}, p50 {quantile(batch, 0.5):,.0f} ms, max "
        f"{quantile(batch, 1):,.0f} ms.",
        "",
        "| span, per order | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|",
        _row("order sent → the revision counting it committed (wait for the trigger, the batch)", to_commit),
        _row("committed → `StreamClient` received", commit_to_client),
        _row("committed → drawn on the page (its first frame after the entry)", commit_to_page),
        _row("order sent → `StreamClient` received", to_client),
        _row("**order sent → drawn on the page**", to_page),
        "",
        f"- A running value on the page ≤ {AIM_MS:,} ms p50 after its event: "
        f"**{'met' if met else 'not met'}**, {p50:,.0f} ms p50 on the page.",
        "",
        end,
        "",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="update-latency-") as tmp:
        measured = measure(args, Path(tmp))
    text = render(args=args, date=date, wall=time.monotonic() - started, measured=measured,
                  command=shlex.join([".venv/bin/python", "bench/update_latency.py", *argv]))
    emit_section(args.output, SECTION, text)
    missing = sum(1 for s in (*measured.shown, *measured.on_page) if s.first is None)
    print(f"[update latency] {len(measured.shown)} orders, {missing} never shown (client + page), load "
          f"{os.getloadavg()[0]:.2f}", file=sys.stderr)
    return 0 if measured.shown and missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
