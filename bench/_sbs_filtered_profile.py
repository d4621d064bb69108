"""Where the gateway's time goes with filtered clients (``side_by_side.py --filtered --profile``): py-spy
samples the gateway while N clients over K filters receive their entries, as in the filtered runs; the
collapsed stacks are summed per function (own time and time with the function on the stack) and printed,
the flame graph written to .cache/bench/flame-gateway-filtered-<N/1000>k.svg."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

from _loadgen import GoLoadGen
from _sbs_measure import CONNECT_CONCURRENCY
from _servers import BIN_DIR, Publisher, make_server

from sparkwire_harness.stack import RedisServer


def summarize(raw: str, top: int = 25) -> str:
    """py-spy's raw (collapsed) stacks: per function, the share of samples it runs in itself and on the stack."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    out = [f"{total} samples", "own %  | function"]
    out += [f"{100 * n / total:5.1f} | {f}" for f, n in own.most_common(top)]
    out += ["on stack % | function"]
    out += [f"{100 * n / total:5.1f} | {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(out)


def profile_filtered(args: argparse.Namespace, redis: RedisServer, loadgen: GoLoadGen, workdir: Path) -> None:
    case = args.filtered_cases[0]
    publisher = Publisher("sparkwire", redis, args.payload_bytes, args.commit_interval_ms / 1000)
    publisher.prime()
    publisher.committer.tenants = case.filters
    per_commit = max(1, round(args.filtered_rate * args.commit_interval_ms / 1000)) * case.filters
    server = make_server("sparkwire", redis, workdir).start()
    try:
        publisher.run(1, 0.5)
        loadgen.call("connect", proto="sparkwire", urls=[server.url], count=case.clients,
                     concurrency=CONNECT_CONCURRENCY, filters=case.filters)
        publisher.run(per_commit, args.warmup)
        stem = f"flame-gateway-filtered-{case.clients // 1000}k"
        raw, svg = workdir / f"{stem}.txt", BIN_DIR / f"{stem}.svg"
        seconds = int(args.duration)
        spies = [subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(server.pid),
                                   "--duration", str(seconds), "--rate", "50", "--nonblocking", "--format", fmt,
                                   "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for fmt, out in (("raw", raw), ("flamegraph", svg))]
        loadgen.call("phase_start")
        publisher.run(per_commit, seconds)
        result = loadgen.call("phase_end", head=publisher.head(), timeout=args.catch_up_timeout)
        for spy in spies:
            spy.wait(120)
        print(f"{case.clients} clients over {case.filters} filters: received {result['received']:,} of"
              f" {result['expected']:,}, behind {result['behind']}; flame graph {svg}", file=sys.stderr)
        print(summarize(raw.read_text()))
        loadgen.call("disconnect")
    finally:
        server.stop()
        publisher.close()
