"""Side by side, in one run: sparkwire's gateway, a peer on the Centrifugo engine (centrifuge with its
Redis broker, history and recovery) and a naive Redis pub/sub broadcaster, under the same load from one
compiled load generator; the results go into a marked section of docs/benchmarks.md.

The run is ``--repeats`` passes (3 by default). In each, per client count (1k, 5k, 10k), the servers run one
after the other (the order rotates per count and per pass: bench/_sbs_repeats.py), each pinned to CPU 0 with
the load generator on CPU 1: idle memory per connection and connect time, then one phase per rate
(10 messages/s = one message per frame, 500/s = batched), then per server a SIGKILL with 1k clients
connected (they reconnect to a second instance and resume). The report shows each row's median over the
passes and the spread of its ratios to the peer; an aim is met only when every pass meets it.

``--profile`` instead records py-spy flame graphs of the gateway at 1k and 5k clients into docs/images/.
``--filtered`` instead measures the gateway alone with unfiltered clients and with clients spread over K
distinct filters (issue 43; bench/_sbs_filtered.py), into its own section.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/side_by_side.py        # ~16-20 minutes (3 repeats)
    .venv/bin/python bench/side_by_side.py --quick --repeats 2 --output -          # smoke run
    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/side_by_side.py --filtered  # ~8 minutes
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import emit_section, int_list, machine_info, raise_open_files
from _loadgen import GoLoadGen
from _sbs_filtered import SECTION as FILTERED_SECTION
from _sbs_filtered import parse_cases, run_filtered
from _sbs_filtered import render as render_filtered
from _sbs_filtered_profile import profile_filtered
from _sbs_measure import Idle, Kill, Phase, run_kill, run_server
from _sbs_repeats import run_order
from _sbs_report import SECTION, Context, render
from _servers import REDIS_ARGS, Publisher, go_binary, make_server, repo_root

from sparkwire_harness.stack import RedisServer

SERVERS = ["sparkwire", "centrifuge", "naive"]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--clients", type=int_list, default=[1000, 5000, 10000], help="client counts")
    parser.add_argument("--rates", type=int_list, default=[10, 500], help="messages/s per phase")
    parser.add_argument("--servers", type=lambda t: t.split(","), default=SERVERS, help="servers to measure")
    parser.add_argument("--repeats", type=int, default=3,
                        help="passes over every row and the SIGKILL test (the servers' order rotated each pass)")
    parser.add_argument("--commit-interval-ms", type=int, default=100, help="one commit/publish batch this often")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds of publishing per phase")
    parser.add_argument("--one-per-frame-duration", type=float, default=15.0,
                        help="measured seconds of a phase at one message per batch: such a phase costs a server"
                        " under 1 CPU s per 5 s at 1,000 clients, and a 5 s reading of it moved ~10 %% between passes")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds of publishing before each")
    parser.add_argument("--catch-up-timeout", type=float, default=60.0, help="seconds for clients to catch up")
    parser.add_argument("--payload-bytes", type=int, default=100, help="size of each message's data")
    parser.add_argument("--kill-clients", type=int, default=1000, help="clients in the SIGKILL test (0 skips it)")
    parser.add_argument("--kill-rate", type=int, default=100, help="messages/s during the SIGKILL test")
    parser.add_argument("--kill-after", type=float, default=2.0, help="seconds of publishing before the SIGKILL")
    parser.add_argument("--kill-for", type=float, default=8.0, help="seconds of publishing after it")
    parser.add_argument("--profile", action="store_true",
                        help="only record py-spy flame graphs of the gateway (--profile-clients, rate 10/s; with"
                        " --filtered: its first case, a summary of where the time goes on stdout)")
    parser.add_argument("--profile-clients", type=int_list, default=[1000, 5000])
    parser.add_argument("--filtered", action="store_true",
                        help="only the filtered-subscription comparison (--filtered-cases, --filtered-rate)")
    parser.add_argument("--filtered-cases", type=parse_cases, default=parse_cases("5000:100:2,10000:1000:1"),
                        help="clients:filters:repeats,... (each repeat: one unfiltered and one filtered run)")
    parser.add_argument("--filtered-rate", type=int, default=10,
                        help="entries/s each client receives (filtered runs publish this x filters)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 clients, 3 s phases, 100-client kill")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks.md"), help="'-' for stdout only")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.filtered:  # its unfiltered and filtered runs measure the same time
        args.one_per_frame_duration = args.duration
    if args.quick:
        args.clients, args.duration, args.kill_for = [200], 3.0, 4.0
        args.one_per_frame_duration = args.duration
        args.kill_clients = min(args.kill_clients, 100)
        args.filtered_cases = parse_cases("200:10:1")
    return args


def profile(args: argparse.Namespace, redis: RedisServer, loadgen: GoLoadGen, workdir: Path) -> None:
    """A flame graph of the gateway while it delivers one message per frame to N clients."""
    publisher = Publisher("sparkwire", redis, args.payload_bytes, args.commit_interval_ms / 1000)
    publisher.prime()
    for clients in args.profile_clients:
        server = make_server("sparkwire", redis, workdir).start()
        try:
            loadgen.call("connect", proto="sparkwire", urls=[server.url], count=clients, concurrency=64)
            publisher.run(1, args.warmup)
            out = repo_root() / "docs" / "images" / f"flame-gateway-{clients // 1000}k.svg"
            spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(server.pid),
                                    "--duration", str(int(args.duration) + 2), "--rate", "50", "--nonblocking",
                                    "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            loadgen.call("phase_start")
            publisher.run(1, args.duration + 2)
            loadgen.call("phase_end", head=publisher.head(), timeout=args.catch_up_timeout)
            spy.wait(60)
            print(f"wrote {out} ({out.stat().st_size // 1024} KiB)", file=sys.stderr)
            loadgen.call("disconnect")
        finally:
            server.stop()
    publisher.close()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    command = shlex.join([".venv/bin/python", "bench/side_by_side.py", *argv])
    raise_open_files(max([*args.clients, args.kill_clients, *args.profile_clients,
                          *(c.clients for c in args.filtered_cases)]) + 1024)
    for name in ("loadgen", "centrifuge-peer"):
        go_binary(name)  # built before anything is timed
    load_before = os.getloadavg()
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    idles: list[Idle] = []
    phases: list[Phase] = []
    kills: list[Kill] = []
    with (tempfile.TemporaryDirectory(prefix="sparkwire-sbs-") as tmp,
          RedisServer(Path(tmp), extra_args=REDIS_ARGS) as redis):
        workdir = Path(tmp)
        loadgen = GoLoadGen(workdir / "loadgen.log")
        try:
            if args.profile:
                if args.filtered:
                    profile_filtered(args, redis, loadgen, workdir)
                else:
                    profile(args, redis, loadgen, workdir)
                return 0
            client = redis.client()
            info = machine_info(client)
            client.close()
            if args.filtered:
                publisher = Publisher("sparkwire", redis, args.payload_bytes, args.commit_interval_ms / 1000)
                publisher.prime()
                runs = run_filtered(args, redis, publisher, loadgen, workdir)
                publisher.close()
                shown = [a for i, a in enumerate(argv) if a != "--output" and (i == 0 or argv[i - 1] != "--output")]
                text = render_filtered(args, shlex.join([".venv/bin/python", "bench/side_by_side.py", *shown]), info,
                                       [*load_before, os.getloadavg()[0]], runs)
                emit_section(args.output, FILTERED_SECTION, text)
                return 0
            publishers = {kind: Publisher(kind, redis, args.payload_bytes, args.commit_interval_ms / 1000)
                          for kind in args.servers}
            for publisher in publishers.values():
                publisher.prime()
            for repeat in range(args.repeats):
                print(f"repeat {repeat + 1} of {args.repeats}", file=sys.stderr)
                for index, clients in enumerate(args.clients):
                    for kind in run_order(args.servers, repeat, index):
                        idle, server_phases = run_server(kind, clients, args.rates, args, redis, publishers[kind],
                                                         loadgen, workdir)
                        idle.repeat = repeat + 1
                        for phase in server_phases:
                            phase.repeat = repeat + 1
                        idles.append(idle)
                        phases += server_phases
                if args.kill_clients:
                    for kind in run_order(args.servers, repeat):
                        kill = run_kill(kind, args, redis, publishers[kind], loadgen, workdir)
                        kill.repeat = repeat + 1
                        kills.append(kill)
            for publisher in publishers.values():
                publisher.close()
        finally:
            loadgen.close()
    context = Context(args=args, command=command, info=info, date=date, wall=time.monotonic() - started,
                      load_before=load_before, load_after=os.getloadavg())
    section = render(context, idles, phases, kills)
    emit_section(args.output, SECTION, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
