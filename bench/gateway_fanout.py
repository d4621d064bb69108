"""Gateway fan-out: delivered entries per gateway CPU second, commit->receive latency and memory per
connection, one gateway pod serving 1k and 5k WebSocket clients.

Starts its own ``redis-server`` (``sparkwire_harness.stack.RedisServer``: AOF, ``appendfsync always``) and, per
client count, a fresh gateway (``sparkwire_harness.stack.GatewayProcess``: ``sparkwire gateway`` under uvicorn,
one process = one pod, default options). Commits go through the real commit script
(``sparkwire_harness.stack.Committer``, 100-byte payloads), one commit every ``--commit-interval-ms``, at several
rates. The clients run in ``--workers`` load-generator processes, each one event loop (uvloop) of raw
WebSocket clients that speak the protocol (hello, welcome, snapshot, entries, coalesced acks, pongs, and
a reconnect with session and cursor after a resumable close) with little per-frame work: the seqs and
commit times are taken out of an ``entries`` frame with two regular expressions instead of a JSON parse,
so the load generator is not the bottleneck.

Per run: entries delivered, gateway CPU seconds (utime+stime from /proc/<pid>/stat), delivery latency
(receive time in the client - the entry's ``commitMs``), load-generator and Redis CPU; every client must
receive every seq exactly once, in order, up to the last one committed, or the run is marked failed.
Memory per idle connection: gateway RSS with N clients connected (after welcome and snapshot, no traffic)
minus RSS before they connected, over N. Each set of runs is repeated per ``--variants`` entry: the
gateway as deployed, then with a larger redis-py connection pool. The results go into a marked section
of docs/benchmarks.md.

    .venv/bin/python bench/gateway_fanout.py           # the whole table, about 5 minutes
    .venv/bin/python bench/gateway_fanout.py --quick   # smoke run, about 30 seconds
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from _common import (
    emit_section,
    int_list,
    machine_info,
    raise_open_files,
)
from _fanout_measure import Memory, Phase, Scenario, Workers, run_scenario
from _fanout_report import SECTION, render
from _fanout_shared import STREAM

from sparkwire.replaylog.keys import StreamKeys
from sparkwire_harness.stack import Committer, RedisServer

PAYLOAD_BYTES = 100
POOL_VARIANT = "max_connections=10000"


def padding_for(target: int) -> int:
    """Committer pads ``{"n": n, "pad": "x..."}``; padding so that a 5-digit n gives ``target`` bytes."""
    return max(0, target - len(json.dumps({"n": 10_000, "pad": ""})))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--clients", type=int_list, default=[1000, 5000], help="client counts, e.g. 1000,5000")
    parser.add_argument("--rates", type=int_list, default=[10, 100, 500],
                        help="commit rates in entries/s, e.g. 10,100,500 (rate x interval entries per commit)")
    parser.add_argument("--commit-interval-ms", type=int, default=100, help="one commit this often")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds of commits per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds of commits before each run")
    parser.add_argument("--catch-up-timeout", type=float, default=60.0,
                        help="after the last commit, how long clients may take to receive it")
    parser.add_argument("--deflate-clients", type=int, default=1000,
                        help="one more gateway, started with --per-message-deflate, with this many clients"
                             " offering permessage-deflate like a browser (memory and --deflate-rate); 0 skips it")
    parser.add_argument("--deflate-rate", type=int, default=100, help="commit rate of the deflate run")
    parser.add_argument("--workers", type=int, default=2, help="load-generator processes")
    parser.add_argument("--payload-bytes", type=int, default=PAYLOAD_BYTES, help="size of each entry's data")
    parser.add_argument("--gateway-arg", action="append", default=[],
                        help="extra option for `sparkwire gateway` (repeat; e.g. --gateway-arg=--send-queue=512)")
    parser.add_argument("--variants", type=lambda text: [v.strip() for v in text.split(",")],
                        default=[""],
                        help="query strings for the gateway's --redis-url (redis-py pool options), one set of runs"
                             f" each, '' = as deployed (the default); e.g. ',{POOL_VARIANT}' adds a run with a"
                             " larger pool")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 200 clients, rates 10,100, 3 s runs, 100 deflate clients")
    parser.add_argument("--verbose", action="store_true", help="print the time of each step")
    parser.add_argument("--logs", type=Path, help="copy each gateway's log into this folder")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks.md"), help="'-' for stdout only")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.rates, args.duration, args.warmup = [200], [10, 100], 3.0, 0.5
        args.deflate_clients = min(args.deflate_clients, 100)
    if args.workers < 1 or args.duration <= 0 or args.commit_interval_ms < 1:
        parser.error("--workers, --duration and --commit-interval-ms must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    command = shlex.join([".venv/bin/python", "bench/gateway_fanout.py", *argv])
    raise_open_files(max([*args.clients, args.deflate_clients]) + 1024)
    scenarios = [Scenario(n, False, args.rates, variant) for variant in args.variants for n in args.clients]
    if args.deflate_clients:
        scenarios.append(Scenario(args.deflate_clients, True, [args.deflate_rate], args.variants[-1]))
    load_before = os.getloadavg()
    wall_start = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    memories: list[Memory] = []
    phases: list[Phase] = []
    workers = Workers(args.workers)
    try:
        with tempfile.TemporaryDirectory(prefix="sparkwire-bench-") as tmp, RedisServer(Path(tmp)) as server:
            client = server.client()
            info = machine_info(client)
            committer = Committer(client, STREAM, per_batch=1, payload_bytes=padding_for(args.payload_bytes))
            committer.commit()  # the stream exists (epoch, seq 1) before any gateway starts
            for scenario in scenarios:
                memory, scenario_phases = run_scenario(args, Path(tmp), server, workers, committer, scenario)
                memories.append(memory)
                phases += scenario_phases
            newest = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrevrange(StreamKeys(STREAM).log, count=1))
            _, last = newest[0]
            payload = last[b"data"].decode()
            client.close()
    finally:
        workers.close()
    entry_bytes = len(f'{{"seq":{committer.committed},"processingId":"pid-{committer.committed:08d}","key":"k1",'
                      f'"data":{payload},"commitMs":{int(time.time() * 1000)},"digest":"{"0" * 16}"}}')
    section = render(args, command, info, memories, phases, payload, entry_bytes, load_before, os.getloadavg(),
                     time.monotonic() - wall_start, date)
    emit_section(args.output, SECTION, section)
    return 0 if all(p.exactly_once for p in phases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
