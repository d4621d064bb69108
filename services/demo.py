"""``make demo``: the pipeline on this machine with real processes, and results landing in the replay log.

Starts Redis and a Kafka broker, the aggregator (Spark), two gateways behind nginx (the ingress) and
a producer of live events (with some duplicates and malformed records). Prints every result as it is
committed and the address of the browser page; a Python client reads the stream through nginx while
one gateway is killed and restarted halfway. At the end the log is checked against results computed
independently from the produced events, and the client's entries against the log.

The gateways require tokens, as a chart install does: the demo generates a secret for this run and
mints the tokens of the page (in the printed address, ``#token=…``) and of the Python client.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path

import redis

from sparkwire.client import BackgroundClient
from sparkwire.gateway.auth import issue_token
from sparkwire.paths import cache_dir
from sparkwire.replaylog import ReplayLogReader
from sparkwire.stack import GatewayProcess, KafkaBroker, ManagedProcess, NginxBalancer, RedisServer
from sparkwire.verify import compare, expected_results

WINDOW_MS = 2_000
DELAY_MS = 1_000
STREAM = "metrics"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkwire.demo", description=__doc__)
    parser.add_argument("--seconds", type=int, default=40, help="seconds of live events to produce")
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--hold", type=int, default=0,
                        help="keep everything running this many seconds after the check (to look at the page)")
    args = parser.parse_args(argv)

    workdir = cache_dir() / "run" / f"demo-{int(time.time())}"
    workdir.mkdir(parents=True)
    _say(f"work dir {workdir} (process logs are here)")
    with RedisServer(workdir / "redis") as redis_server, KafkaBroker(workdir / "kafka") as kafka:
        _say(f"redis {redis_server.url}, kafka {kafka.bootstrap}")
        kafka.create_topic("metrics-raw", partitions=2)
        kafka.create_topic("metrics-deadletter", partitions=1)
        python = [sys.executable, "-m", "sparkwire.cli"]
        aggregator = ManagedProcess("aggregator", [
            *python, "aggregate", "--bootstrap-servers", kafka.bootstrap, "--redis-url", redis_server.url,
            "--stream", STREAM, "--checkpoint", str(workdir / "checkpoint"), "--window-ms", str(WINDOW_MS),
            "--watermark-delay-ms", str(DELAY_MS), "--trigger-ms", "500",
        ], workdir)  # fmt: skip
        events_file = workdir / "events.jsonl"
        producer = ManagedProcess("producer", [
            *python, "produce", "--bootstrap-servers", kafka.bootstrap, "--realtime",
            "--duration", str(args.seconds), "--rate", str(args.rate), "--max-disorder-ms", "300",
            "--duplicate-ratio", "0.02", "--malformed-ratio", "0.01", "--events-file", str(events_file),
        ], workdir)  # fmt: skip
        auth_secret = secrets.token_urlsafe(48)  # this run's only: the tokens below die with it
        # Long enough for the run, the check and --hold, and for a page left open a while after.
        token = issue_token(auth_secret, [STREAM], 3600 + args.seconds + args.hold, subject="demo",
                            now=int(time.time()))
        gateways = [GatewayProcess(workdir, redis_server.url, [STREAM], auth_secret=auth_secret).start()
                    for _ in range(2)]
        nginx = NginxBalancer(workdir / "nginx", [g.port for g in gateways])
        nginx.start()
        page = f"{nginx.url}/?stream={STREAM}#token={token}"
        _say(f"gateways on ports {[g.port for g in gateways]} behind nginx (tokens required); open {page}")
        watcher = BackgroundClient(f"{nginx.ws_url}/ws?stream={STREAM}", token=token).start()
        _say("starting the Spark aggregator (takes ~10 s) and the producer")
        aggregator.start()
        producer.start()
        reader = ReplayLogReader(redis.Redis.from_url(redis_server.url), STREAM)
        shown = 0
        killed_at = time.monotonic() + args.seconds / 2
        try:
            while producer.alive:
                shown = _show(reader, shown)
                if not aggregator.alive:
                    _say(f"aggregator exited:\n{aggregator.log_tail(40)}")
                    return 1
                if killed_at and time.monotonic() > killed_at:
                    killed_at = 0
                    _say(f"SIGKILL gateway on port {gateways[0].port}; its clients resume on the other; restarting it")
                    gateways[0].process.kill()
                    gateways[0].start()
                time.sleep(0.5)
            raw = [json.loads(line)["value"] for line in events_file.read_text().splitlines()]
            expected = expected_results(raw, WINDOW_MS, DELAY_MS)
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
            if args.hold:
                _say(f"holding for {args.hold} s: {page}")
                time.sleep(args.hold)
        finally:
            watcher.stop()
            aggregator.stop(timeout=30)
            producer.stop()
            nginx.stop()
            for gateway in gateways:
                gateway.stop()
        _say(f"logs: {Path(workdir)}")
        return 0 if report.ok and client_ok else 1


if __name__ == "__main__":
    sys.exit(main())
