"""Update mode, event -> running value on a client (issue 19, item 3): how soon after an order is sent does a
client hold a revision of its window that counts it.

The orders example (``sparkwire.examples.orders``: a team's own query, update mode, sliding windows of 10 s every
5 s, watermark delay 5 s, its default 1 s trigger) runs as ``make demo`` runs it, against a real Kafka broker and
``redis-server`` (AOF, ``appendfsync always``) started here. Once the job's first micro-batch is done, the
example's producer sends orders at wall-clock time (``ts`` = the time it sends each one; ~2 % sent twice, ~1 %
not orders) to a one-partition topic, and a gateway serves the stream to one ``StreamClient``. Per order
(``_update_latency.first_shown``): the first revision of one of its windows counting it, and that revision's
commit and receive times minus the order's ``ts``. The first ``--warmup-seconds`` of orders are left out (the
driver's JIT is still cold there); every order after them must be shown.

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

import redis
from _common import emit_section, git_revision, machine_info, markers, quantile, reproduce_lines
from _spark_rates import aggregate_batches
from _update_latency import Received, Shown, first_shown

from sparkwire.client.background import BackgroundClient
from sparkwire.examples.orders.produce import load_orders
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire_harness.stack import GatewayProcess, KafkaBroker, ManagedProcess, RedisServer

SECTION = "update_latency"
WINDOW_MS, SLIDE_MS, DELAY_MS, TRIGGER_MS = 10_000, 5_000, 5_000, 1_000  # the orders example's defaults
AIM_MS = 1_500
TOPIC = STREAM = "orders"
REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=100.0, help="orders per second")
    parser.add_argument("--seconds", type=float, default=45.0, help="how long orders are sent")
    parser.add_argument("--warmup-seconds", type=float, default=5.0, help="first orders left out of the figures")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md", help="'-' for stdout")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace, workdir: Path) -> tuple[list[Shown], list[int], int, dict[str, str]]:
    """Returns each order's ``Shown``, the job's batch durations (ms) while orders flowed, the revisions
    received and the machine's description."""
    received: list[Received] = []

    def on_entry(entry: ReceivedEntry) -> None:
        data = entry.data if isinstance(entry.data, dict) else {}
        received.append(Received(str(data.get("windowEnd")), str(data.get("region")), int(data.get("orders", 0)),
                                 entry.commit_ms, int(time.time() * 1000)))

    with RedisServer(workdir / "redis") as redis_server, KafkaBroker(workdir / "kafka") as kafka:
        kafka.create_topic(TOPIC, partitions=1)  # Kafka order is the job's order: first_shown relies on it
        gateway = GatewayProcess(workdir, redis_server.url, [STREAM]).start()
        client = BackgroundClient(gateway.ws(STREAM), on_entry=on_entry).start()
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
                "--topic", TOPIC, "--rate", str(args.rate), "--duration", str(args.seconds),
                "--orders-file", str(orders_file)], workdir)  # fmt: skip
            producer.start()
            while producer.alive:
                time.sleep(0.5)
            if producer.returncode != 0:
                raise RuntimeError(f"producer failed:\n{producer.log_tail(20)}")
            time.sleep(3 * TRIGGER_MS / 1000 + 2)  # the last orders' batch and its delivery
        finally:
            client.stop()
            job.stop(timeout=30)
            gateway.stop()
        info = machine_info(redis.Redis.from_url(redis_server.url))
        batches = aggregate_batches(job.log_path.read_text(errors="replace").splitlines(), query=None)
        durations = [b.duration_ms for b in batches[first_batch:] if b.rows > 0]
    orders = load_orders(orders_file)
    start_ms = min(o.ts_ms for o in orders) + int(args.warmup_seconds * 1000)
    shown = [s for s in first_shown(orders, received, WINDOW_MS, SLIDE_MS) if s.ts_ms >= start_ms]
    return shown, durations, len(received), info


def _row(name: str, values: Sequence[int]) -> str:
    ordered = sorted(values)
    cells = " | ".join(f"{quantile(ordered, q):,.0f}" for q in (0.5, 0.9, 0.99, 1))
    return f"| {name} | {cells} |"


def render(*, args: argparse.Namespace, date: str, wall: float, info: dict[str, str], revision: str, command: str,
           shown: Sequence[Shown], durations: Sequence[int], revisions: int) -> str:
    start, end = markers(SECTION)
    missing = sum(1 for s in shown if s.first is None)
    to_commit = [s.event_to_commit_ms for s in shown if s.event_to_commit_ms is not None]
    to_client = [s.event_to_received_ms for s in shown if s.event_to_received_ms is not None]
    commit_to_client = [b - a for a, b in zip(to_commit, to_client, strict=True)]
    p50 = quantile(sorted(to_client), 0.5)
    met = missing == 0 and p50 <= AIM_MS
    batch = sorted(durations)
    return "\n".join([
        start,
        "## Update mode: an order → its running value on a client",
        "",
        "The orders example (`sparkwire.examples.orders`: update mode, sliding windows of 10 s every 5 s, watermark "
        "delay 5 s, its default 1 s trigger) as `make demo` runs it, on this machine's real Kafka broker and "
        "`redis-server` (AOF, `appendfsync always`), a gateway and one `StreamClient`; generated by "
        "`bench/update_latency.py` (method in its docstring).",
        "",
        *reproduce_lines(date, wall, f"flock /tmp/sparkwire-heavy.lock {command}"),
        f"- Code: {revision}. Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM; Redis {info['redis']}.",
        f"- Orders: {args.rate:,.0f}/s for {args.seconds:.0f} s at wall-clock time to a one-partition topic (each "
        f"order's `ts` is when it was sent); the first {args.warmup_seconds:.0f} s left out: {len(shown):,} orders "
        f"measured, {revisions:,} revisions received, {missing} orders never shown.",
        f"- The job's micro-batches meanwhile: {len(batch)}, p50 {quantile(batch, 0.5):,.0f} ms, max "
        f"{quantile(batch, 1):,.0f} ms.",
        "",
        "| span, per order | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|",
        _row("order sent → the revision counting it committed (wait for the trigger, the batch)", to_commit),
        _row("committed → client received", commit_to_client),
        _row("order sent → client received", to_client),
        "",
        f"- A running value on the page ≤ {AIM_MS:,} ms p50 after its event (issue 19, item 3): "
        f"**{'met' if met else 'not met'}**, {p50:,.0f} ms p50"
        f"{'' if missing == 0 else f'; {missing} orders never shown'}.",
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
        shown, durations, revisions, info = measure(args, Path(tmp))
    text = render(args=args, date=date, wall=time.monotonic() - started, info=info,
                  revision=git_revision(REPO, ["services/sparkwire/examples", "services/sparkwire/spark", "bench"]),
                  command=shlex.join([".venv/bin/python", "bench/update_latency.py", *argv]),
                  shown=shown, durations=durations, revisions=revisions)
    emit_section(args.output, SECTION, text)
    missing = sum(1 for s in shown if s.first is None)
    print(f"[update latency] {len(shown)} orders, {missing} never shown, load {os.getloadavg()[0]:.2f}",
          file=sys.stderr)
    return 0 if shown and missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
