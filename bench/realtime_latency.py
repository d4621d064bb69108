"""Real-time mode against micro-batches, event -> client: how soon after a large order is sent do 1,000
connected clients, a ``StreamClient`` and the page in Chromium have it.

The large-orders feed (``sparkwire.examples.large_orders``: a filter and a projection of the orders topic, each
order of at least 500 an entry) runs twice in one run, one mode after the other, on the same machine, the same real
Kafka broker and ``redis-server`` (AOF, ``appendfsync always``) and one gateway: under Spark's real-time mode
(``mode="realtime"``: Spark's Kafka sink, the relay topic, the relay's commit) and under micro-batches
(``mode="append"``, the default 1 s trigger). For each mode: the job is started and warmed up (orders until its
first entry, then ``--warmup-seconds`` more), then ``--clients`` clients of the Go load generator (bench/loadgen),
one ``BackgroundClient`` and the feed page (``/feed``, the example's page: the newest rows first; ``&record=1``:
each frame's top seq and time) follow the stream while the orders example's producer sends ``--rate`` orders a
second for ``--seconds`` (each order's ``ts`` is when it is sent). Every client must end with every entry exactly
once.

Per entry (one large order): sent -> committed (the commit script's clock: Kafka, Spark, the relay or the
micro-batch, the commit), split at the order's record time in its topic (set to the broker's append time) and,
in real-time mode, at its row's record time in the relay topic (when Spark's Kafka sink sent it), both read
back from the topics once the run is over; committed -> received (the ``StreamClient``, and the load
generator's histogram over its clients), committed -> drawn on the page (its first frame at or after the
entry's seq), and sent -> received / drawn. And where the CPU went while the orders were sent: each
process's (with its children's) CPU seconds from /proc, and the whole machine's from /proc/stat, over the
phase's wall time.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/realtime_latency.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from _common import (
    emit_section,
    histogram_quantile,
    machine_cpu_seconds,
    machine_info,
    markers,
    named_cpu_seconds,
    quantile,
    reproduce_lines,
    tree_cpu_seconds,
)
from _loadgen import GoLoadGen
from _sbs_measure import Outcome
from confluent_kafka import Consumer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from playwright.sync_api import sync_playwright

from sparkwire.client.background import BackgroundClient
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire.replaylog import ReplayLogReader
from sparkwire.spark.delivery.relay import relay_row, relay_topic
from sparkwire.spark.stream import ID_FIELD
from sparkwire_harness.stack import GatewayProcess, KafkaBroker, ManagedProcess, RedisServer

SECTION = "realtime_latency"
MODES = ("realtime", "micro-batch")
THRESHOLD = "500"
AIM_P50_MS, AIM_P99_MS = 50, 200
REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=1_000, help="load-generator clients per mode")
    parser.add_argument("--rate", type=float, default=20.0, help="orders per second (about half are large)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long orders are sent, per mode")
    parser.add_argument("--warmup-seconds", type=float, default=10.0, help="orders before the measured ones")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md", help="'-' for stdout")
    return parser.parse_args(argv)


@dataclass
class Measured:
    mode: str
    sent_to_commit: list[int] = field(default_factory=list)
    sent_to_kafka: list[int] = field(default_factory=list)  # the orders topic's append time
    kafka_to_relay: list[int] = field(default_factory=list)  # real-time mode: out of Spark, into the relay topic
    relay_to_commit: list[int] = field(default_factory=list)
    commit_to_client: list[int] = field(default_factory=list)
    commit_to_page: list[int] = field(default_factory=list)
    sent_to_client: list[int] = field(default_factory=list)
    sent_to_page: list[int] = field(default_factory=list)
    crowd: Outcome = field(default_factory=Outcome)
    cpu_cores: dict[str, float] = field(default_factory=dict)  # mean cores busy while the orders were sent
    entries: int = 0
    client_problems: int = 0
    not_drawn: int = 0


def _ms(iso: str) -> int:
    moment = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000)


def _producer(workdir: Path, kafka: KafkaBroker, topic: str, rate: float, seconds: float, name: str,
              seed: int) -> ManagedProcess:
    return ManagedProcess(name, [
        sys.executable, "-m", "sparkwire.examples.orders.produce", "--bootstrap-servers", kafka.bootstrap,
        "--topic", topic, "--rate", str(rate), "--duration-ms", str(round(seconds * 1000)), "--seed", str(seed),
        "--orders-file", str(workdir / f"{name}.jsonl")],
        workdir)  # fmt: skip


def record_times(kafka: KafkaBroker, topic: str, id_of: Callable[[Any], str | None],
                 idle_s: float = 3.0) -> dict[str, int]:
    """Each record's time in ``topic`` (its timestamp: the broker's append time on the orders topic, set so
    below; on the relay topic, when Spark's Kafka sink sent the row) by the entry id ``id_of`` gives it, read
    from the topic's start by a consumer of its own once the run is over."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    times: dict[str, int] = {}
    try:
        quiet_until = time.monotonic() + 30  # the first poll joins the group
        while time.monotonic() < quiet_until:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            quiet_until = time.monotonic() + idle_s
            found = id_of(message)
            if found is not None:
                times[found] = message.timestamp()[1]
    finally:
        consumer.close()
    return times


def _relayed_id(message: Any) -> str | None:
    """The entry id the relay gives a relay-topic row (``<topic>/<partition>/<offset>``, ``#<index>`` after)."""
    try:
        row = relay_row(message.value())
    except ValueError:
        return None
    return f"{row.source}/{row.offset}" + (f"#{row.index}" if row.index else "")


def _order_id(message: Any) -> str:
    """The entry id of an orders-topic record: its position, as the feed's entries are named."""
    return f"{message.topic()}/{message.partition()}/{message.offset()}"


def append_times(kafka: KafkaBroker, topic: str) -> None:
    """``topic``'s records stamped by the broker when it appends them (``LogAppendTime``), not by the producer:
    the time an order reached Kafka. The feed's query reads the orders' own ``ts``, never this timestamp."""
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)])
    admin = kafka.admin()  # held until the change is done: a client destroyed meanwhile fails its futures
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _run_to_end(process: ManagedProcess) -> None:
    process.start()
    while process.alive:
        time.sleep(0.2)
    if process.returncode != 0:
        raise RuntimeError(f"{process.name} failed:\n{process.log_tail(20)}")


def measure_mode(mode: str, args: argparse.Namespace, workdir: Path, kafka: KafkaBroker, redis_server: RedisServer,
                 gateway: GatewayProcess, loadgen: GoLoadGen, browser: object) -> Measured:
    stream = topic = f"feed-{mode}"
    kafka.create_topic(topic, partitions=2)
    append_times(kafka, topic)
    job = ManagedProcess(f"job-{mode}", [sys.executable, "-m", "sparkwire.examples.large_orders", "run", "--mode",
                                         mode, "--master", "local[3]"], workdir, env={
        "LARGE_ORDERS_BOOTSTRAP_SERVERS": kafka.bootstrap, "LARGE_ORDERS_TOPIC": topic,
        "LARGE_ORDERS_STREAM": stream, "LARGE_ORDERS_REDIS_URL": redis_server.url,
        "LARGE_ORDERS_CHECKPOINT": str(workdir / f"checkpoint-{mode}"), "LARGE_ORDERS_THRESHOLD": THRESHOLD})
    reader = ReplayLogReader(redis_server.client(), stream)
    measured = Measured(mode)
    job.start()
    try:
        deadline = time.monotonic() + 180
        while reader.meta().last_seq == 0:  # warm-up orders until the job's first entry
            if not job.alive or time.monotonic() > deadline:
                raise RuntimeError(f"the {mode} job delivered nothing:\n{job.log_tail(40)}")
            _run_to_end(_producer(workdir, kafka, topic, args.rate, 2, f"warm-{mode}", seed=1))
        _run_to_end(_producer(workdir, kafka, topic, args.rate, args.warmup_seconds, f"warm2-{mode}", seed=2))
        time.sleep(2)
        start_seq = reader.meta().last_seq
        received: list[tuple[ReceivedEntry, int]] = []
        client = BackgroundClient(gateway.ws(stream), on_entry=lambda e: received.append((e, int(time.time() * 1000))))
        client.start()
        page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
        page.goto(f"{gateway.http}/feed?stream={stream}&record=1")
        loadgen.call("connect", proto="sparkwire", urls=[gateway.ws(stream)], count=args.clients, concurrency=64)
        time.sleep(2)
        loadgen.call("phase_start")
        users = {"Spark job (driver, executors, relay)": job.pid, "gateway": gateway.process.pid,
                 "load generator (1 process)": loadgen.pid, "Kafka broker": kafka.process.pid,
                 "redis-server": redis_server.process.pid}
        before, machine_before, started = cpu_by(users), machine_cpu_seconds(), time.monotonic()
        _run_to_end(_producer(workdir, kafka, topic, args.rate, args.seconds, f"orders-{mode}", seed=3))
        elapsed = time.monotonic() - started
        after = cpu_by(users)
        measured.cpu_cores = {name: (after[name] - before[name]) / elapsed for name in after}
        measured.cpu_cores["whole machine"] = (machine_cpu_seconds() - machine_before) / elapsed
        time.sleep(3)  # the last micro-batch and its delivery
        head = reader.meta().last_seq
        measured.crowd = Outcome.of(loadgen.call("phase_end", head=head, timeout=60))
        loadgen.call("disconnect")
        frames = [(int(seq), int(ms)) for seq, ms in page.evaluate("window.__feed.drawn")]
        page.close()
        client.stop()
    finally:
        job.stop(timeout=30)
    appended = record_times(kafka, topic, _order_id)
    relayed = record_times(kafka, relay_topic(stream), _relayed_id) if mode == "realtime" else {}
    seqs = [entry.seq for entry, _ in received]
    measured.client_problems = len(seqs) - len(set(seqs)) + len(set(range(start_seq + 1, head + 1)) - set(seqs))
    for entry, received_ms in received:
        if entry.seq <= start_seq or not isinstance(entry.data, dict):
            continue
        sent = _ms(str(entry.data["orderTime"]))
        measured.entries += 1
        measured.sent_to_commit.append(entry.commit_ms - sent)
        pid = str(entry.data.get(ID_FIELD))
        appended_ms, relayed_ms = appended.get(pid), relayed.get(pid)
        if appended_ms is not None:
            measured.sent_to_kafka.append(appended_ms - sent)
        if relayed_ms is not None and appended_ms is not None:
            measured.kafka_to_relay.append(relayed_ms - appended_ms)
            measured.relay_to_commit.append(entry.commit_ms - relayed_ms)
        measured.commit_to_client.append(received_ms - entry.commit_ms)
        measured.sent_to_client.append(received_ms - sent)
        drawn = next((ms for seq, ms in frames if seq >= entry.seq), None)
        if drawn is None:
            measured.not_drawn += 1
        else:
            measured.commit_to_page.append(drawn - entry.commit_ms)
            measured.sent_to_page.append(drawn - sent)
    if relayed:  # where the slowest rows were: when they were sent (from the first measured order), and how long
        timed = sorted((relayed[str(entry.data.get(ID_FIELD))] - _ms(str(entry.data["orderTime"])),
                        _ms(str(entry.data["orderTime"])), entry.data.get(ID_FIELD)) for entry, _ in received
                       if entry.seq > start_seq and isinstance(entry.data, dict)
                       and str(entry.data.get(ID_FIELD)) in relayed)
        first = min(sent for _, sent, _ in timed) if timed else 0
        print(f"[{mode}] slowest out of Spark: " + ", ".join(
            f"{pid} sent at +{(sent - first) / 1000:.2f} s: {delay} ms" for delay, sent, pid in timed[-8:]),
            file=sys.stderr)
    c = measured.crowd
    print(f"[{mode}] {measured.entries} entries; client p50 {quantile(sorted(measured.sent_to_client), 0.5):.0f} ms; "
          f"{c.clients} clients: complete {c.complete}, lost {c.lost}, dup {c.duplicates}, behind {c.behind}, "
          f"commit->received p50/p99 {c.latency_ms(0.5):.1f}/{c.latency_ms(0.99):.1f} ms", file=sys.stderr)
    return measured


BROWSER = "Chromium (the page)"


def cpu_by(pids: dict[str, int | None]) -> dict[str, float]:
    """CPU seconds so far of each process tree in ``pids``, and of the browser's processes (by name: they are
    the Playwright driver's children, not this process's)."""
    seconds = {name: tree_cpu_seconds(pid) if pid else 0.0 for name, pid in pids.items()}
    seconds[BROWSER] = named_cpu_seconds("chrom")
    return seconds


def measure(args: argparse.Namespace, workdir: Path) -> tuple[list[Measured], dict[str, str]]:
    with (RedisServer(workdir / "redis") as redis_server, KafkaBroker(workdir / "kafka", quick_jit=False) as kafka,
          sync_playwright() as playwright):
        gateway = GatewayProcess(workdir, redis_server.url, [f"feed-{mode}" for mode in MODES]).start()
        loadgen = GoLoadGen(workdir / "loadgen.log")
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            results = [measure_mode(mode, args, workdir, kafka, redis_server, gateway, loadgen, browser)
                       for mode in MODES]
        finally:
            browser.close()
            loadgen.close()
            gateway.stop()
        return results, machine_info(redis.Redis.from_url(redis_server.url))


def _cells(values: Sequence[int]) -> str:
    ordered = sorted(values)
    return " | ".join(f"{quantile(ordered, q):,.0f}" for q in (0.5, 0.99, 1)) if ordered else "- | - | -"


def _crowd_cells(outcome: Outcome) -> str:
    return " | ".join(f"{histogram_quantile(outcome.hist, q):,.1f}" for q in (0.5, 0.99, 1))


def cpu_rows(results: Sequence[Measured]) -> list[str]:
    names = [name for name in results[0].cpu_cores if name != "whole machine"]
    rest = [m.cpu_cores.get("whole machine", 0.0) - sum(m.cpu_cores.get(name, 0.0) for name in names)
            for m in results]
    rows = [f"| {name} | " + " | ".join(f"{m.cpu_cores.get(name, 0.0):.2f}" for m in results) + " |"
            for name in names]
    rows.append("| the rest | " + " | ".join(f"{value:.2f}" for value in rest) + " |")
    rows.append("| **whole machine** | " + " | ".join(f"**{m.cpu_cores.get('whole machine', 0.0):.2f}**"
                                                    for m in results) + " |")
    return rows


def exactly_once(m: Measured) -> bool:
    c = m.crowd
    return m.client_problems == 0 and c.lost == 0 and c.duplicates == 0 and c.behind == 0 and c.complete == c.clients


def render(*, args: argparse.Namespace, date: str, wall: float, command: str, results: list[Measured],
           info: dict[str, str]) -> str:
    start, end = markers(SECTION)
    rows = []
    for name, attribute in (("order sent → committed (Kafka, Spark, the commit)", "sent_to_commit"),
                            ("· order sent → in Kafka (the producer, the broker's append)", "sent_to_kafka"),
                            ("· in Kafka → out of Spark (Spark reads, filters, its Kafka sink sends)",
                             "kafka_to_relay"),
                            ("· out of Spark → committed (the relay topic, the relay, the commit)",
                             "relay_to_commit"),
                            ("committed → `StreamClient` received", "commit_to_client"),
                            ("committed → drawn on the page", "commit_to_page"),
                            ("order sent → `StreamClient` received", "sent_to_client"),
                            ("**order sent → drawn on the page**", "sent_to_page")):
        rows.append(f"| {name} | " + " | ".join(_cells(getattr(m, attribute)) for m in results) + " |")
    rows.append(f"| committed → received, {args.clients:,} load-generator clients | "
                + " | ".join(_crowd_cells(m.crowd) for m in results) + " |")
    realtime = results[0]
    p50 = quantile(sorted(realtime.sent_to_page), 0.5)
    p99 = quantile(sorted(realtime.sent_to_page), 0.99)
    met = exactly_once(realtime) and p50 <= AIM_P50_MS and p99 <= AIM_P99_MS
    outcomes = "; ".join(
        f"{m.mode}: {m.entries:,} entries, {m.crowd.complete:,} of {m.crowd.clients:,} clients complete, "
        f"{m.crowd.lost} lost, {m.crowd.duplicates} duplicates, the `StreamClient` "
        f"{'exactly once' if m.client_problems == 0 else f'{m.client_problems} problems'}, {m.not_drawn} not drawn"
        for m in results)
    return "\n".join([
        start,
        "## Real-time mode: a large order → the page, beside micro-batches",
        "",
        "The large-orders feed (`sparkwire.examples.large_orders`: a filter and a projection, each order of at least "
        f"{THRESHOLD} an entry) under Spark's real-time mode and under micro-batches (its default 1 s trigger), one "
        "after the other in one run, on this machine's real Kafka broker and `redis-server` (AOF, `appendfsync "
        f"always`), one gateway, {args.clients:,} clients of the Go load generator, one `StreamClient` and the "
        "feed page (`/feed`) in Chromium; generated by `bench/realtime_latency.py` (method in its docstring).",
        "",
        *reproduce_lines(date, wall, f"flock /tmp/sparkwire-heavy.lock {command}"),
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM; Redis {info['redis']}.",
        f"- Orders: {args.rate:,.0f}/s for {args.seconds:.0f} s per mode to a two-partition topic, after "
        f"{args.warmup_seconds:.0f} s of warm-up; {outcomes}.",
        "",
        "| span, per large order (ms) | real-time p50 | p99 | max | micro-batch p50 | p99 | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Where the CPU went while the orders were sent (mean cores busy, "
        f"of {info['nproc']}; each process with its children; *the rest* is this bench's `StreamClient` and "
        "producer, and the machine's other work):",
        "",
        "| process | real-time | micro-batch |",
        "|---|---:|---:|",
        *cpu_rows(results),
        "",
        f"- Real-time mode, order sent → drawn on the page ≤ {AIM_P50_MS} ms p50 and ≤ {AIM_P99_MS} ms p99 with "
        f"{args.clients:,} clients connected, every client exactly once: **{'met' if met else 'not met'}** "
        f"({p50:,.0f} ms p50, {p99:,.0f} ms p99).",
        "",
        end,
        "",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="realtime-latency-") as tmp:
        results, info = measure(args, Path(tmp))
    text = render(args=args, date=date, wall=time.monotonic() - started, results=results, info=info,
                  command=shlex.join([".venv/bin/python", "bench/realtime_latency.py", *argv]))
    emit_section(args.output, SECTION, text)
    return 0 if all(exactly_once(m) for m in results) else 1


if __name__ == "__main__":
    sys.exit(main())
