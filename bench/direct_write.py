"""Direct write: the CPU one send costs the gateway's process to N loopback TCP connections, through uvloop's
``transport.write`` and through ``contract.write_direct`` (the socket written first while the transport holds
nothing unsent), alternating in one run. The connections' other ends are read by a child process pinned to
CPU 1 (as the load generator is); the sender is pinned to CPU 0. One ~150-byte frame per connection per round.

    .venv/bin/python bench/direct_write.py --connections 9000 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import time

import uvloop

from sparkwire.gateway.transport.contract import write_direct
from sparkwire.gateway.transport.wire import socket_fd

FRAME = b"\x81\x7e\x00\x96" + b"x" * 150  # a text frame of 150 bytes, unmasked, as the hub writes one


class _Sink(asyncio.Protocol):
    def data_received(self, data: bytes) -> None:
        pass


async def _read_everything(port: int, connections: int) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(connections):
        await loop.create_connection(_Sink, "127.0.0.1", port)
    await asyncio.sleep(3600)


async def _measure(connections: int, rounds: int, repeats: int) -> dict[str, list[float]]:
    accepted: list[asyncio.Transport] = []

    class Accept(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.append(transport)  # type: ignore[arg-type]

    server = await asyncio.get_running_loop().create_server(Accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    child = os.fork()
    if child == 0:
        os.sched_setaffinity(0, {1})
        uvloop.run(_read_everything(port, connections))
        os._exit(0)
    try:
        while len(accepted) < connections:
            await asyncio.sleep(0.05)
        lanes = [(transport, socket_fd(transport)) for transport in accepted]

        def through_transport() -> None:
            for transport, _ in lanes:
                transport.write(FRAME)

        def direct() -> None:
            for transport, fd in lanes:
                write_direct(transport, fd, FRAME)

        results: dict[str, list[float]] = {"transport.write": [], "write_direct": []}
        for _ in range(repeats):
            for name, write in (("transport.write", through_transport), ("write_direct", direct)):
                start = time.process_time()
                for _ in range(rounds):
                    write()
                    await asyncio.sleep(0.02)  # the readers drain; each round finds the buffers empty
                results[name].append((time.process_time() - start) / (rounds * connections) * 1e6)
        return results
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, default=9000)
    parser.add_argument("--rounds", type=int, default=60, help="frames per connection per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each way, alternating")
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = uvloop.run(_measure(args.connections, args.rounds, args.repeats))
    for name, figures in results.items():
        print(f"{name}: {', '.join(f'{us:.2f}' for us in figures)} µs of the process's CPU per send"
              f" ({args.connections:,} connections)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
