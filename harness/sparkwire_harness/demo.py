"""``make demo``: the pipeline on this machine with real processes, and results landing in the replay log.

Starts Redis and a Kafka broker, two Spark jobs — the built-in metrics aggregator, and the orders example
(``sparkwire.examples.orders``: a team's own query delivered through ``sparkwire.spark``, update mode) —
two gateways behind nginx (the ingress) serving both streams, and producers of live events and orders
(with some duplicates and malformed records). Prints every metrics result as it is committed and the
addresses of the browser pages; Python clients read both streams through nginx while one gateway is killed
and restarted halfway. With ``--redis replicated`` Redis is 1 primary, 2 replicas and 3 sentinels, every
process finds the primary through Sentinel, the jobs wait for a replica before publishing, and the primary
is SIGKILLed halfway too (a failover). At the end both logs are checked against results computed independently from what
was produced (for orders: every revision of every result), and each client's entries against its log.

The gateways require tokens, as a chart install does: the demo generates a secret for this run and
mints the tokens of the page (in the printed address, ``#token=…``) and of the Python client.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from sparkwire.client import BackgroundClient
from sparkwire.examples.orders.expected import committed_batches, delivered_revisions, differences, expected_revisions
from sparkwire.examples.orders.produce import load_orders
from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.paths import cache_dir
from sparkwire.replaylog import ReplayLogReader
from sparkwire.replaylog.redis_url import connect
from sparkwire_harness.stack import (
    GatewayProcess,
    KafkaBroker,
    ManagedProcess,
    NginxBalancer,
    RedisServer,
    ReplicatedRedis,
    exit_on_sigterm,
)
from sparkwire_harness.verify import compare, expected_results, oracle_input, read_produced

WINDOW_MS = 2_000
DELAY_MS = 1_000
STREAM = "metrics"
ORDERS = "orders"
ORDERS_WINDOW_MS, ORDERS_SLIDE_MS, ORDERS_DELAY_MS = 10_000, 5_000, 2_000


def _log_client(url: str) -> redis.Redis:
    """The demo's own reads of the logs; retried for ~10 s, longer than a failover takes."""
    return connect(url, retry=Retry(ExponentialWithJitterBackoff(base=0.1, cap=1.0), retries=15))


def _say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def _show(reader: ReplayLogReader, after: int) -> int:
    for entry in reader.read_after(after):
        result = json.loads(entry.data)
        print(
            f"  seq {entry.seq:>4}  {result['metricName']:<9} window ending {result['windowEnd']}  "
            f"count {result['count']:>4}  avg {result['avg']:8.3f}  id {entry.processing_id[:10]}…",
            flush=True,
        )
        after = entry.seq
    return after


def _orders_settings(bootstrap: str, redis_url: str, checkpoint: Path) -> dict[str, str]:
    return {"ORDERS_BOOTSTRAP_SERVERS": bootstrap, "ORDERS_TOPIC": ORDERS, "ORDERS_STREAM": ORDERS,
            "ORDERS_REDIS_URL": redis_url, "ORDERS_CHECKPOINT": str(checkpoint),
            "ORDERS_WINDOW_MS": str(ORDERS_WINDOW_MS), "ORDERS_SLIDE_MS": str(ORDERS_SLIDE_MS),
            "ORDERS_WATERMARK_DELAY_MS": str(ORDERS_DELAY_MS), "ORDERS_TRIGGER_MS": "500"}


def _check_orders(redis_url: str, orders_file: Path, checkpoint: Path, watcher: BackgroundClient) -> bool:
    """Every revision of every orders result in the log, exactly as computed from the produced orders and the
    job's batches; and the client connected from the start holds the whole log, in order, once."""
    orders = load_orders(orders_file)
    ends: dict[int, int] = {}
    for order in orders:
        ends[order.partition] = max(ends.get(order.partition, 0), order.offset + 1)
    deadline = time.monotonic() + 60
    batches = committed_batches(checkpoint, ORDERS)
    while not (batches and all(batches[-1].end.get(p, 0) >= end for p, end in ends.items())):
        if time.monotonic() > deadline:
            _say("MISMATCH: the orders job did not read every order within 60 s")
            return False
        time.sleep(0.5)
        batches = committed_batches(checkpoint, ORDERS)
    reader = ReplayLogReader(_log_client(redis_url), ORDERS)
    entries = list(reader.iter_all())
    found, problems = delivered_revisions(entries)
    wrong = problems + differences(found, expected_revisions(orders, batches, ORDERS_WINDOW_MS, ORDERS_SLIDE_MS))
    results = {key for revisions in found.values() for key in revisions}
    _say(("OK, exactly once into the log: " if not wrong else "MISMATCH in the log: ")
         + f"orders: {len(orders)} orders, {len(entries)} revisions of {len(results)} results over {len(batches)} "
         f"batches, {len(wrong)} wrong" + "".join(f"\n  {line}" for line in wrong[:10]))
    log = [(entry.seq, entry.processing_id) for entry in entries]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and watcher.client.applied[-1:] != log[-1:]:
        time.sleep(0.2)
    stats = watcher.client.stats()
    client_ok = watcher.client.applied == log and stats.duplicates == 0 and stats.gaps == 0
    _say(("OK, exactly once to the client: " if client_ok else "MISMATCH at the client: ")
         + f"orders: {len(watcher.client.applied)} revisions applied of {len(log)}, {stats.reconnects} reconnects, "
         f"duplicates {stats.duplicates}, gaps {stats.gaps}")
    return not wrong and client_ok


@dataclass
class _Pipeline:
    """The demo's two Spark jobs and two producers, and the files they write."""

    aggregator: ManagedProcess
    orders_job: ManagedProcess
    producer: ManagedProcess
    orders_producer: ManagedProcess
    events_file: Path
    orders_file: Path
    orders_checkpoint: Path

    def start(self) -> None:
        for process in (self.aggregator, self.orders_job, self.producer, self.orders_producer):
            process.start()

    def stop(self) -> None:
        self.aggregator.stop(timeout=30)
        self.orders_job.stop(timeout=30)
        self.producer.stop()
        self.orders_producer.stop()


def _pipeline(workdir: Path, bootstrap: str, redis_url: str, replicas: str, seconds: int, rate: float) -> _Pipeline:
    """The jobs and producers, not started: the metrics aggregator and producer through ``sparkwire``'s own
    command, the orders job and producer as a team runs its own."""
    python = [sys.executable, "-m", "sparkwire.cli"]
    aggregator = ManagedProcess("aggregator", [
        *python, "aggregate", "--bootstrap-servers", bootstrap, "--redis-url", redis_url,
        "--stream", STREAM, "--checkpoint", str(workdir / "checkpoint"), "--window-ms", str(WINDOW_MS),
        "--watermark-delay-ms", str(DELAY_MS), "--trigger-ms", "500", "--redis-replicas", replicas,
    ], workdir)  # fmt: skip
    orders_checkpoint = workdir / "checkpoint-orders"
    orders_job = ManagedProcess("orders-job", [sys.executable, "-m", "sparkwire.examples.orders", "run"], workdir,
                                env={**_orders_settings(bootstrap, redis_url, orders_checkpoint),
                                     "SPARKWIRE_REDIS_REPLICAS": replicas})
    orders_file = workdir / "orders.jsonl"
    orders_producer = ManagedProcess("orders-producer", [
        sys.executable, "-m", "sparkwire.examples.orders.produce", "--bootstrap-servers", bootstrap,
        "--topic", ORDERS, "--rate", "20", "--duration-ms", str(round(seconds * 1000)),
        "--orders-file", str(orders_file),
    ], workdir)  # fmt: skip
    events_file = workdir / "events.jsonl"
    producer = ManagedProcess("producer", [
        *python, "produce", "--bootstrap-servers", bootstrap, "--realtime",
        "--duration-ms", str(round(seconds * 1000)), "--rate", str(rate), "--max-disorder-ms", "300",
        "--duplicate-ratio", "0.02", "--malformed-ratio", "0.01", "--events-file", str(events_file),
        # Heartbeats to every partition, and for a window + delay after the last event: without them the
        # last window stays open (no partition reads past its end + delay), as docs/replay-log.md says.
        "--heartbeat-ms", "500", "--idle-ms", str(WINDOW_MS + DELAY_MS + 1000),
    ], workdir)  # fmt: skip
    return _Pipeline(aggregator, orders_job, producer, orders_producer, events_file, orders_file, orders_checkpoint)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sparkwire_harness.demo", description=__doc__)
    parser.add_argument("--seconds", type=int, default=40, help="seconds of live events to produce")
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--hold", type=int, default=0,
                        help="keep everything running this many seconds after the check (to look at the page)")
    parser.add_argument("--redis", choices=("single", "replicated"), default="single",
                        help="single: one redis-server; replicated: 1 primary + 2 replicas + 3 sentinels, the "
                        "primary SIGKILLed halfway")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    replicated = args.redis == "replicated"
    exit_on_sigterm()  # a SIGTERM (timeout, kill) stops the whole stack as Ctrl-C does

    workdir = cache_dir() / "run" / f"demo-{int(time.time())}"
    workdir.mkdir(parents=True)
    _say(f"work dir {workdir} (process logs are here)")
    redis_stack = ReplicatedRedis(workdir / "redis") if replicated else RedisServer(workdir / "redis")
    # Replicated: a batch is published only once a replica holds it (docs/replay-log.md, "Across a failover").
    replicas = "1" if replicated else "0"
    with redis_stack as redis_server, KafkaBroker(workdir / "kafka") as kafka:
        _say(f"redis {redis_server.url}, kafka {kafka.bootstrap}")
        kafka.create_topic("metrics-raw", partitions=2)
        kafka.create_topic("metrics-deadletter", partitions=1)
        kafka.create_topic(ORDERS, partitions=2)
        pipeline = _pipeline(workdir, kafka.bootstrap, redis_server.url, replicas, args.seconds, args.rate)
        auth_secret = secrets.token_urlsafe(48)  # this run's only: the tokens below die with it
        # Long enough for the run, the check and --hold, and for a page left open a while after.
        token = issue_token(auth_secret, [STREAM, ORDERS], 3600 + args.seconds + args.hold, subject="demo",
                            now=int(time.time()))
        gateways, nginx, page = _serve(workdir, redis_server.url, auth_secret, token)
        # keep_applied: the demo's check compares every entry a client applied with its log.
        watcher = BackgroundClient(f"{nginx.ws_url}/ws?stream={STREAM}", token=token, keep_applied=True).start()
        orders_watcher = BackgroundClient(f"{nginx.ws_url}/ws?stream={ORDERS}", token=token,
                                          keep_applied=True).start()
        _say("starting the Spark jobs (metrics aggregator and orders, ~20 s) and the producers")
        pipeline.start()
        reader = ReplayLogReader(_log_client(redis_server.url), STREAM)
        try:
            shown = _show_until_produced(pipeline, reader, gateways, redis_server, args.seconds)
            if shown is None:
                return 1
            metrics_ok = _check_metrics(reader, shown, pipeline.events_file, watcher)
            orders_ok = _check_orders(redis_server.url, pipeline.orders_file, pipeline.orders_checkpoint,
                                      orders_watcher)
            if args.hold:
                _say(f"holding for {args.hold} s: {page}")
                time.sleep(args.hold)
        finally:
            watcher.stop()
            orders_watcher.stop()
            pipeline.stop()
            nginx.stop()
            for gateway in gateways:
                gateway.stop()
        _say(f"logs: {Path(workdir)}")
        return 0 if metrics_ok and orders_ok else 1


def _serve(workdir: Path, redis_url: str, auth_secret: str,
           token: str) -> tuple[list[GatewayProcess], NginxBalancer, str]:
    """Two gateways behind nginx, started; the page's address (with the token) is the third."""
    gateways = [GatewayProcess(workdir, redis_url, [STREAM, ORDERS], auth_secret=auth_secret).start()
                for _ in range(2)]
    nginx = NginxBalancer(workdir / "nginx", [g.port for g in gateways])
    nginx.start()
    page = f"{nginx.url}/?stream={STREAM}#token={token}"
    orders_page = f"{nginx.url}/?stream={ORDERS}#token={token}"
    _say(f"gateways on ports {[g.port for g in gateways]} behind nginx (tokens required); open {page}")
    _say(f"the orders stream (update mode: the open windows move): {orders_page}")
    return gateways, nginx, page


def _show_until_produced(pipeline: _Pipeline, reader: ReplayLogReader, gateways: list[GatewayProcess],
                         redis_server: RedisServer | ReplicatedRedis, seconds: int) -> int | None:
    """Print the metrics results as they are committed while the producer runs, with the kills halfway; the
    last seq shown, or None when a job exited."""
    shown = 0
    killed_at = time.monotonic() + seconds / 2
    while pipeline.producer.alive:
        shown = _show(reader, shown)
        for job in (pipeline.aggregator, pipeline.orders_job):
            if not job.alive:
                _say(f"{job.name} exited:\n{job.log_tail(40)}")
                return None
        if killed_at and time.monotonic() > killed_at:
            killed_at = 0
            _kill_halfway(gateways, redis_server)
        time.sleep(0.5)
    return shown


def _kill_halfway(gateways: list[GatewayProcess], redis_server: RedisServer | ReplicatedRedis) -> None:
    """SIGKILL one gateway (its clients resume on the other) and restart it; replicated, the Redis primary too."""
    _say(f"SIGKILL gateway on port {gateways[0].port}; its clients resume on the other; restarting it")
    gateways[0].process.kill()
    gateways[0].start()
    if isinstance(redis_server, ReplicatedRedis):
        old = redis_server.kill_primary()
        _say(f"SIGKILL the Redis primary (port {old.port}); the sentinels promote a replica")
        new = redis_server.wait_for_failover(old)
        _say(f"Redis primary is now port {new.port}; the jobs and gateways followed it; "
             f"port {old.port} restarts as a replica")
        redis_server.restart(old)


def _check_metrics(reader: ReplayLogReader, shown: int, events_file: Path, watcher: BackgroundClient) -> bool:
    """The metrics log against the results computed from the produced events, and the client connected from the
    start against the log."""
    expected = expected_results(oracle_input(read_produced(events_file)), WINDOW_MS, DELAY_MS)
    _say(f"producer done; waiting for the last of {len(expected)} closed windows")
    deadline = time.monotonic() + 60
    while reader.meta().last_seq < len(expected) and time.monotonic() < deadline:
        shown = _show(reader, shown)
        time.sleep(0.5)
    shown = _show(reader, shown)
    log = [(entry.seq, entry.processing_id) for entry in reader.iter_all()]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and watcher.client.applied[-1:] != log[-1:]:
        time.sleep(0.2)
    report = compare(expected, list(reader.iter_all()))
    meta = reader.meta()
    _say(f"epoch {meta.epoch}, seqs {meta.first_seq}..{meta.last_seq}, counters {meta.counters}")
    _say(("OK, exactly once into the log: " if report.ok else "MISMATCH in the log: ") + report.summary())
    stats = watcher.client.stats()
    # The client connected before the first commit: it must hold the whole log, in order, once.
    client_ok = watcher.client.applied == log and stats.duplicates == 0 and stats.gaps == 0
    _say(("OK, exactly once to the client: " if client_ok else "MISMATCH at the client: ")
         + f"{len(watcher.client.applied)} entries applied of {len(log)}, {stats.reconnects} reconnects, "
         f"closes {stats.closes}, duplicates {stats.duplicates}, gaps {stats.gaps}")
    return report.ok and client_ok


if __name__ == "__main__":
    sys.exit(main())
