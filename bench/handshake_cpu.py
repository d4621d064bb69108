"""Handshake CPU: the server's own CPU time per connection while N clients connect, for the gateway and the
Centrifugo-engine peer, each pinned to CPU 0 with the load generator on CPU 1 (as bench/side_by_side.py).
What the side-by-side's "connect all" rows are made of, measured alone, repeats alternating the servers; each
split into user space and the kernel (/proc/<pid>/stat), the kernel's share being the sockets' work.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/handshake_cpu.py --clients 5000 --repeats 3
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
    args = parser.parse_args()
    raise_open_files(args.clients + 1024)
    for binary in ("loadgen", "centrifuge-peer"):
        go_binary(binary)
    with (tempfile.TemporaryDirectory(prefix="sparkwire-handshake-") as tmp,
          RedisServer(Path(tmp), extra_args=REDIS_ARGS) as redis):
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
                        time.sleep(0.5)
                        user_before, system_before = process_cpu_split(server.pid)
                        result = loadgen.call("connect", proto=kind, urls=[server.url], count=args.clients,
                                              concurrency=CONNECT_CONCURRENCY)
                        user_after, system_after = process_cpu_split(server.pid)
                        user, system = user_after - user_before, system_after - system_before
                        cpu = user + system
                        print(f"{kind}: {result['connected']} of {args.clients} connected in {result['seconds']:.2f} s,"
                              f" {cpu:.2f} CPU s: {cpu / args.clients * 1e6:.0f} µs of server CPU per handshake"
                              f" ({user / args.clients * 1e6:.0f} user, {system / args.clients * 1e6:.0f} kernel)",
                              flush=True)
                        loadgen.call("disconnect")
                    finally:
                        server.stop()
        finally:
            loadgen.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
