"""The gateway fan-out benchmark's measurement (main process): the worker processes, one gateway per
scenario, one measured phase per commit rate (delivered entries, gateway/Redis/load-generator CPU, latency
histogram, exactly-once check) and the idle memory per connection."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import multiprocessing.connection
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import pace, process_cpu_seconds, process_memory_kib, settle_rss
from _fanout_loadgen import worker_main
from _fanout_shared import HIST_PER_MS, STREAM

from sparkwire.replaylog.keys import StreamKeys
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer


class Workers:
    """The load-generator processes; each command goes to all of them and their answers come back."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[multiprocessing.connection.Connection] = []
        self.processes = []
        for index in range(count):
            parent, child = context.Pipe()
            process = context.Process(target=worker_main, args=(child,), name=f"loadgen-{index}", daemon=True)
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)

    def call(self, *commands: tuple[Any, ...], timeout: float = 300) -> list[dict[str, Any]]:
        """Send ``commands[i]`` to worker i (one command for all if only one is given)."""
        for index, pipe in enumerate(self.pipes):
            pipe.send(commands[index] if len(commands) > 1 else commands[0])
        results = []
        deadline = time.monotonic() + timeout
        for pipe, process in zip(self.pipes, self.processes, strict=True):
            while not pipe.poll(0.5):
                if not process.is_alive():
                    raise RuntimeError(f"{process.name} exited with code {process.exitcode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{process.name} did not answer within {timeout:.0f} s")
            results.append(pipe.recv())
        return results

    def connect(self, port: int, clients: int, deflate: bool) -> dict[str, Any]:
        shares = [clients // len(self.pipes) + (1 if i < clients % len(self.pipes) else 0)
                  for i in range(len(self.pipes))]
        results = self.call(*[("connect", "127.0.0.1", port, share, deflate) for share in shares])
        codes: dict[int, int] = {}
        for r in results:
            for code, n in r["close_codes"].items():
                codes[code] = codes.get(code, 0) + n
        return {"connected": sum(r["connected"] for r in results), "failed": sum(r["failed"] for r in results),
                "failures": [f for r in results for f in r["failures"]][:5],
                "retried": sum(r["retried"] for r in results), "deflate": sum(r["deflate"] for r in results),
                "close_codes": codes, "seconds": max(r["seconds"] for r in results)}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(("exit",), timeout=15)
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.kill()


@dataclass
class Phase:
    """One measured run: ``clients`` connected clients, commits at ``rate`` entries/s."""

    clients: int
    deflate: bool
    variant: str
    rate: int
    per_commit: int
    commits: int = 0
    committed: int = 0
    commit_seconds: float = 0.0
    wall: float = 0.0
    gateway_cpu: float = 0.0
    redis_cpu: float = 0.0
    loadgen_cpu: float = 0.0
    received: int = 0
    expected: int = 0
    complete: int = 0
    resets: int = 0
    reconnects: int = 0
    dead: int = 0
    behind: int = 0
    duplicates: int = 0
    gaps: int = 0
    disorders: int = 0
    frames: int = 0
    acks: int = 0
    bytes: int = 0
    gateway_counted: float = 0.0
    errors: list[str] = field(default_factory=list)
    close_codes: dict[int, int] = field(default_factory=dict)
    hist: dict[int, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return _label(self.variant, self.deflate)

    @property
    def exactly_once(self) -> bool:
        return (0 < self.complete == self.clients and 0 < self.received == self.expected and not self.behind
                and not (self.duplicates or self.gaps or self.disorders or self.resets or self.dead))

    @property
    def commit_rate(self) -> float:
        return self.committed / self.commit_seconds if self.commit_seconds else 0.0

    @property
    def delivered_per_s(self) -> float:
        return self.received / self.wall if self.wall else 0.0

    @property
    def per_cpu(self) -> float:
        return self.received / self.gateway_cpu if self.gateway_cpu else float("inf")

    def latency_ms(self, q: float) -> float:
        total = sum(self.hist.values())
        if not total:
            return float("nan")
        rank = max(1, -(-q * total // 1))  # nearest rank
        seen = 0
        for bucket in sorted(self.hist):
            seen += self.hist[bucket]
            if seen >= rank:
                return (bucket + 1) / HIST_PER_MS  # upper edge of the 0.1 ms bucket
        return float("nan")

    @property
    def latency_max_ms(self) -> float:
        return (max(self.hist) + 1) / HIST_PER_MS if self.hist else float("nan")


@dataclass
class Memory:
    clients: int
    deflate: bool
    variant: str
    connected: int
    connect_seconds: float
    before: dict[str, int]
    after: dict[str, int]
    retried: int = 0
    deflate_negotiated: int = 0
    close_codes: dict[int, int] = field(default_factory=dict)
    after_runs: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return _label(self.variant, self.deflate)

    def per_connection_kb(self, field_name: str = "VmRSS", after: dict[str, int] | None = None) -> float:
        after = self.after if after is None else after
        return (after[field_name] - self.before[field_name]) * 1024 / 1000 / max(self.connected, 1)


@dataclass
class Scenario:
    """One gateway start: ``clients`` clients, a run per rate; ``variant`` = query string of the gateway's
    Redis URL (redis-py pool options), "" = as deployed."""

    clients: int
    deflate: bool
    rates: list[int]
    variant: str


def _label(variant: str, deflate: bool) -> str:
    return (f"pool {variant}" if variant else "as deployed") + (", deflate" if deflate else "")

def commit_paced(committer: Committer, per_commit: int, interval: float, seconds: float) -> tuple[int, float]:
    """``per_commit`` records every ``interval`` s through the commit script (``_common.pace``)."""
    return pace(committer.commit, per_commit, interval, seconds, lambda n: setattr(committer, "per_batch", n))


def head_seq(server: RedisServer) -> int:
    with server.client() as client:
        return int(client.hget(StreamKeys(STREAM).meta, "last_seq") or 0)


def delivered_counter(gateway: GatewayProcess) -> float:
    """The gateway's own count of entries sent (a cross-check, printed only); NaN if it does not answer, 0
    before it sent any (the labelled counter has no sample until then)."""
    try:
        return gateway.metric("sparkwire_gateway_entries_delivered_total", default=0)
    except OSError:
        return float("nan")

def run_phase(args: argparse.Namespace, server: RedisServer, gateway: GatewayProcess, workers: Workers,
              committer: Committer, scenario: Scenario, clients: int, rate: int) -> Phase:
    interval = args.commit_interval_ms / 1000
    per_commit = max(1, round(rate * interval))
    phase = Phase(clients=clients, deflate=scenario.deflate, variant=scenario.variant, rate=rate,
                  per_commit=per_commit)
    commit_paced(committer, per_commit, interval, args.warmup)
    gateway_pid, redis_pid = gateway.process.pid, server.process.pid
    assert gateway_pid is not None and redis_pid is not None
    counted_before = delivered_counter(gateway)
    gateway_cpu0, redis_cpu0 = process_cpu_seconds(gateway_pid), process_cpu_seconds(redis_pid)
    started = [r["t"] for r in workers.call(("phase_start",))]
    t0 = max(started)
    phase.commits, phase.commit_seconds = commit_paced(committer, per_commit, interval, args.duration)
    phase.committed = phase.commits * per_commit
    head = head_seq(server)
    results = workers.call(("phase_end", head, args.catch_up_timeout), timeout=args.catch_up_timeout + 120)
    gateway_cpu1, redis_cpu1 = process_cpu_seconds(gateway_pid), process_cpu_seconds(redis_pid)
    reached = [r["reached_at"] for r in results]
    t1 = max(r for r in reached if r is not None) if all(r is not None for r in reached) else time.time()
    phase.wall = t1 - t0
    phase.gateway_cpu = gateway_cpu1 - gateway_cpu0
    phase.redis_cpu = redis_cpu1 - redis_cpu0
    phase.gateway_counted = delivered_counter(gateway) - counted_before
    phase.clients = sum(r["clients"] for r in results)
    for r in results:
        phase.loadgen_cpu += r["cpu"]
        phase.received += r["received"]
        phase.expected += r["expected"]
        phase.resets += r["resets"]
        phase.reconnects += r["reconnects"]
        phase.dead += r["dead"]
        phase.complete += r["complete"]
        phase.behind += r["behind"]
        phase.duplicates += r["duplicates"]
        phase.gaps += r["gaps"]
        phase.disorders += r["disorders"]
        phase.frames += r["frames"]
        phase.acks += r["acks"]
        phase.bytes += r["bytes"]
        phase.errors += r["errors"]
        for code, n in r["close_codes"].items():
            phase.close_codes[code] = phase.close_codes.get(code, 0) + n
        for bucket, n in r["hist"].items():
            phase.hist[bucket] = phase.hist.get(bucket, 0) + n
    print(
        f"[{phase.label}] clients={clients:<5} rate={rate:<5} delivered {phase.delivered_per_s:>10,.0f}/s"
        f"  gateway cpu {phase.gateway_cpu:5.2f}s ({phase.per_cpu:,.0f}/cpu-s)  p50 {phase.latency_ms(0.5):.1f}"
        f" p99 {phase.latency_ms(0.99):.1f} max {phase.latency_max_ms:.1f} ms  loadgen cpu {phase.loadgen_cpu:.2f}s"
        f"  exactly once {'yes' if phase.exactly_once else 'NO'} ({phase.complete}/{phase.clients} complete,"
        f" {phase.received:,}/{phase.expected:,} entries, gateway counted {phase.gateway_counted:,.0f};"
        f" {phase.frames:,} frames, {phase.acks:,} acks;"
        f" reconnects {phase.reconnects}, snapshot resets {phase.resets}, gave up {phase.dead})",
        file=sys.stderr,
    )
    for error in phase.errors:
        print(f"  error: {error}", file=sys.stderr)
    if phase.close_codes:
        print(f"  closed by the server: {phase.close_codes}", file=sys.stderr)
    return phase


def run_scenario(args: argparse.Namespace, workdir: Path, server: RedisServer, workers: Workers,
                 committer: Committer, scenario: Scenario) -> tuple[Memory, list[Phase]]:
    url = f"{server.url}?{scenario.variant}" if scenario.variant else server.url
    extra = [*args.gateway_arg, *(["--per-message-deflate"] if scenario.deflate else [])]
    started = time.monotonic()

    def step(what: str) -> None:
        if args.verbose:
            print(f"  {time.monotonic() - started:6.1f}s {what}", file=sys.stderr)

    gateway = GatewayProcess(workdir, url, [STREAM], *extra).start()
    try:
        pid = gateway.process.pid
        assert pid is not None
        step("gateway ready")
        commit_paced(committer, 1, 0.05, 0.5)  # the hub follows the stream; its ring holds a few entries
        workers.connect(gateway.port, 20, scenario.deflate)  # first connections load lazy code paths
        workers.call(("disconnect",))
        time.sleep(0.5)
        before = settle_rss(pid)
        step("warm-up connections done")
        connected = workers.connect(gateway.port, scenario.clients, scenario.deflate)
        step("clients connected")
        if connected["failed"]:
            print(f"  {connected['failed']} clients failed to connect: {connected['failures']}", file=sys.stderr)
        after = settle_rss(pid, 3.0)
        memory = Memory(scenario.clients, scenario.deflate, scenario.variant, connected["connected"],
                        connected["seconds"], before, after, connected["retried"], connected["deflate"],
                        connected["close_codes"])
        print(
            f"[{memory.label}] clients={scenario.clients:<5} connected {connected['connected']} in"
            f" {connected['seconds']:.1f}s ({connected['retried']} retried, server closes"
            f" {connected['close_codes'] or 'none'}, deflate negotiated {connected['deflate']}); idle RSS"
            f" {before['VmRSS'] / 1024:.1f} -> {after['VmRSS'] / 1024:.1f} MiB = {memory.per_connection_kb():.1f} KB"
            " per connection",
            file=sys.stderr,
        )
        phases = [run_phase(args, server, gateway, workers, committer, scenario, connected["connected"], rate)
                  for rate in scenario.rates]
        memory.after_runs = process_memory_kib(pid)
        workers.call(("disconnect",))
        step("clients disconnected")
        if not all(p.exactly_once for p in phases):
            print(f"gateway log ({gateway.process.log_path}) ends with:\n{gateway.process.log_tail(60)}",
                  file=sys.stderr)
        return memory, phases
    finally:
        gateway.stop()
        step("gateway stopped")
        if args.logs is not None:
            args.logs.mkdir(parents=True, exist_ok=True)
            name = f"gateway-{scenario.clients}-{_label(scenario.variant, scenario.deflate)}.log"
            shutil.copyfile(gateway.process.log_path, args.logs / name.replace(" ", "_").replace(",", ""))
