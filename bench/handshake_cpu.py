"""Handshake CPU: the server's own CPU time per connection while N clients connect, for the gateway and the
Centrifugo-engine peer, each pinned to CPU 0 with the load generator on CPU 1 (as bench/side_by_side.py).
What the side-by-side's "connect all" rows are made of, measured alone, repeats alternating the servers; each
split into user space and the kernel (/proc/<pid>/stat), the kernel's share being the sockets' work.

``--rounds N`` connects the clients N times on one server process (all disconnected in between): how much a
server's connect time moves from one connect to the next, apart from its start. ``--appendfsync no`` runs
Redis without an fsync per write: whether the gateway's session writes are what its connect waits for.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/handshake_cpu.py --clients 5000 --repeats 3
    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/handshake_cpu.py --clients 1000 --repeats 2 --rounds 4
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import process_cpu_split, raise_open_files
from _loadgen import GoLoadGen
from _sbs_measure import CONNECT_CONCURRENCY
from _servers import REDIS_ARGS, Publisher, go_binary, make_server

from sparkwire_harness.stack import RedisServer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=5000, help="clients connecting per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per server, alternating")
    parser.add_argument("--servers", type=lambda text: text.split(","), default=["sparkwire", "centrifuge"])
    parser.add_argument("--rounds", type=int, default=1, help="connects per server process (disconnected between)")
    parser.add_argument("--appendfsync", choices=["always", "no"], default="always",
                        help="Redis's fsync policy (the benchmarks' Redis: always)")
    args = parser.parse_args()
    raise_open_files(args.clients + 1024)
    for binary in ("loadgen", "centrifuge-peer"):
        go_binary(binary)
    with (tempfile.TemporaryDirectory(prefix="sparkwire-handshake-") as tmp,
          RedisServer(Path(tmp), extra_args=[*REDIS_ARGS, "--appendfsync", args.appendfsync]) as redis):
        workdir = Path(tmp)
        loadgen = GoLoadGen(workdir / "loadgen.log")
        publishers: dict[str, Publisher] = {}
        try:
            for _ in range(args.repeats):
                for kind in args.servers:
                    publisher = publishers.get(kind)
                    if publisher is None:
                        publisher = publishers[kind] = Publisher(kind, redis, 100, 0.1)
                        publisher.prime()
                    server = make_server(kind, redis, workdir).start()
                    try:
                        publisher.run(1, 0.5)  # the server follows the stream before the first client
                        loadgen.call("connect", proto=kind, urls=[server.url], count=20,
                                     concurrency=CONNECT_CONCURRENCY)
                        loadgen.call("disconnect")  # the first connections load lazy code paths
                        for round_number in range(1, args.rounds + 1):
                            time.sleep(0.5)
                            connect_once(loadgen, kind, server.pid, server.url, args.clients,
                                         f" (round {round_number})" if args.rounds > 1 else "")
                            loadgen.call("disconnect")
                    finally:
                        server.stop()
        finally:
            loadgen.close()
    return 0


def connect_once(loadgen: GoLoadGen, kind: str, pid: int, url: str, clients: int, label: str) -> None:
    """Connect ``clients`` and print the time and the server's CPU per handshake."""
    user_before, system_before = process_cpu_split(pid)
    result = loadgen.call("connect", proto=kind, urls=[url], count=clients, concurrency=CONNECT_CONCURRENCY)
    user_after, system_after = process_cpu_split(pid)
    user, system = user_after - user_before, system_after - system_before
    cpu = user + system
    print(f"{kind}{label}: {result['connected']} of {clients} connected in {result['seconds']:.2f} s,"
          f" {cpu:.2f} CPU s: {cpu / clients * 1e6:.0f} µs of server CPU per handshake"
          f" ({user / clients * 1e6:.0f} user, {system / clients * 1e6:.0f} kernel)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
