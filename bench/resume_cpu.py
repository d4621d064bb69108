"""Resume storm: what the surviving server spends when the clients of a SIGKILLed one all come back to it, for
the gateway and the Centrifugo-engine peer, storms alternating. The SIGKILL test of bench/side_by_side.py,
looked at from the server's side: its "catch-up" row is decided by how long the last client waits for its
handshake while the others' queue ahead of it, and that queue is the surviving server's CPU per resume.

Per storm: two instances on one Redis (CPU 0, the load generator on CPU 1), ``--clients`` on the first,
publishing ``--rate`` messages/s; SIGKILL of the first half-way between two batches. Printed: the second
instance's CPU in the second after the kill (user / kernel; it includes the live feed to the clients already
back), that per client, and from the clients' side when the last one dialled, and from each client's dial to
its welcome (sparkwire) or subscribe reply (centrifuge): p50 / p99 / max.

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/resume_cpu.py --storms 4
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _common import raise_open_files
from _loadgen import GoLoadGen
from _sbs_measure import kill_storm
from _servers import REDIS_ARGS, Publisher, go_binary

from sparkwire_harness.stack import RedisServer

COMMIT_INTERVAL_S = 0.1
WINDOW_S = 1.0  # the server's CPU is read over this long after the kill: every client is back within it


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=1000, help="clients resuming per storm")
    parser.add_argument("--storms", type=int, default=3, help="storms per server, alternating")
    parser.add_argument("--rate", type=int, default=100, help="messages/s published throughout")
    parser.add_argument("--servers", type=lambda text: text.split(","), default=["sparkwire", "centrifuge"])
    args = parser.parse_args()
    raise_open_files(args.clients + 1024)
    for binary in ("loadgen", "centrifuge-peer"):
        go_binary(binary)
    storms: dict[str, list[Resumes]] = {kind: [] for kind in args.servers}
    with (tempfile.TemporaryDirectory(prefix="sparkwire-resume-") as tmp,
          RedisServer(Path(tmp), extra_args=REDIS_ARGS) as redis):
        workdir = Path(tmp)
        loadgen = GoLoadGen(workdir / "loadgen.log")
        publishers: dict[str, Publisher] = {}
        try:
            for storm in range(args.storms):
                for kind in args.servers[storm % len(args.servers):] + args.servers[:storm % len(args.servers)]:
                    publisher = publishers.get(kind)
                    if publisher is None:
                        publisher = publishers[kind] = Publisher(kind, redis, 100, COMMIT_INTERVAL_S)
                        publisher.prime()
                    storms[kind].append(one_storm(kind, args, redis, publisher, loadgen, workdir))
        finally:
            loadgen.close()
            for publisher in publishers.values():
                publisher.close()
    print(f"medians of {args.storms} storms, {args.clients:,} clients:")
    for kind, runs in storms.items():
        def median(figure: str, runs: list[Resumes] = runs) -> float:
            return float(statistics.median(getattr(run, figure) for run in runs))
        print(f"  {kind}: {median('cpu_per_client_us'):.0f} µs of CPU per client"
              f" ({min(r.cpu_per_client_us for r in runs):.0f}-{max(r.cpu_per_client_us for r in runs):.0f}),"
              f" dial to positioned p50 {median('positioned_p50_ms'):.0f} ms, p99 {median('positioned_p99_ms'):.0f} ms,"
              f" every client back after {median('back_s'):.3f} s"
              f" ({min(r.back_s for r in runs):.3f}-{max(r.back_s for r in runs):.3f})")
    return 0


@dataclass(frozen=True)
class Resumes:
    cpu_per_client_us: float  # the survivor's CPU in the second after the kill, per client
    back_s: float  # the kill to the last client positioned again
    positioned_p50_ms: float  # a client's dial to its welcome / subscribe reply
    positioned_p99_ms: float


def one_storm(kind: str, args: argparse.Namespace, redis: RedisServer, publisher: Publisher, loadgen: GoLoadGen,
              workdir: Path) -> Resumes:
    """One SIGKILL (``_sbs_measure.kill_storm``, as the side-by-side's); prints what it measured."""
    storm = kill_storm(kind, redis, publisher, loadgen, workdir, clients=args.clients,
                       per_commit=max(1, round(args.rate * COMMIT_INTERVAL_S)), interval=COMMIT_INTERVAL_S,
                       warmup=1.0, kill_after=1.0, kill_for=WINDOW_S + 1.0, timeout=30, cpu_window_s=WINDOW_S)
    assert storm.survivor_cpu is not None
    (user, kernel), result, killed_at = storm.survivor_cpu, storm.result, storm.killed_at
    per_client = (user + kernel) / args.clients * 1e6
    p50, p99, slowest = result["positioned_ms"]
    print(f"{kind}: {user + kernel:.2f} CPU s in the second after the kill ({user:.2f} user, {kernel:.2f} kernel),"
          f" {per_client:.0f} µs per client; last dial {result['last_dial_at'] - killed_at:.3f} s, every client"
          f" back {result['back_at'] - killed_at:.3f} s; dial to positioned p50/p99/max"
          f" {p50:.0f}/{p99:.0f}/{slowest:.0f} ms; lost {result['lost']}, duplicated {result['duplicates']}",
          flush=True)
    return Resumes(per_client, result["back_at"] - killed_at, p50, p99)


if __name__ == "__main__":
    raise SystemExit(main())
