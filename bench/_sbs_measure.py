"""Measurement of the side-by-side benchmark: per server and client count, idle memory and connect time
and one delivery phase per rate; per server, a SIGKILL with clients connected. The numbers come from
the Go load generator (what the clients saw) and /proc (the server's and Redis's CPU and memory)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import histogram_quantile, process_cpu_seconds, process_cpu_split, settle_rss
from _loadgen import GoLoadGen
from _servers import Publisher, Server, make_server

from sparkwire_harness.stack import RedisServer

CONNECT_CONCURRENCY = 64


@dataclass
class Outcome:
    """What the clients saw in one phase (summed over clients)."""

    clients: int = 0
    received: int = 0
    expected: int = 0
    lost: int = 0
    duplicates: int = 0
    resets: int = 0
    reconnects: int = 0
    complete: int = 0
    behind: int = 0
    frames: int = 0
    acks: int = 0
    wrong: int = 0  # filtered clients: entries received that their filter does not admit
    covered: int = 0  # log positions the clients moved past, all together (delivered or filtered out)
    loadgen_cpu: float = 0.0
    hist: list[tuple[float, int]] = field(default_factory=list)
    close_codes: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, r: dict[str, Any]) -> Outcome:
        return cls(clients=r["clients"], received=r["received"], expected=r["expected"], lost=r["lost"],
                   duplicates=r["duplicates"], resets=r["resets"], reconnects=r["reconnects"],
                   complete=r["complete"], behind=r["behind"], frames=r["frames"], acks=r["acks"],
                   wrong=r.get("wrong", 0), covered=r.get("covered", 0), loadgen_cpu=r["cpu"],
                   hist=[(float(e), int(n)) for e, n in r["hist"]],
                   close_codes={int(k): int(v) for k, v in r["close_codes"].items()}, errors=r["errors"] or [])

    @property
    def exactly_once(self) -> bool:
        return (0 < self.complete == self.clients and self.received == self.expected and not self.behind
                and not (self.lost or self.duplicates or self.resets or self.wrong))

    def latency_ms(self, q: float) -> float:
        return histogram_quantile(self.hist, q)


@dataclass
class Phase:
    server: str
    clients: int
    rate: int
    per_commit: int
    published: int
    publish_seconds: float
    wall: float
    server_cpu: float
    redis_cpu: float
    seen: Outcome
    filters: int = 0  # K distinct filters over the clients (0: unfiltered)
    repeat: int = 1  # which pass of the side-by-side run measured it (1, 2, ...)
    server_kernel_cpu: float = float("nan")  # of server_cpu, the kernel's on the server's behalf (its sockets' work)

    @property
    def evaluated_per_cpu(self) -> float:
        """(Log entry, client) pairs the server accounted for, delivered or filtered out (the positions the
        clients moved past), per CPU second."""
        return self.seen.covered / self.server_cpu if self.server_cpu else float("nan")

    @property
    def delivered_per_s(self) -> float:
        return self.seen.received / self.wall if self.wall else 0.0

    @property
    def per_cpu(self) -> float:
        return self.seen.received / self.server_cpu if self.server_cpu else float("nan")

    @property
    def per_frame(self) -> float:
        return self.seen.received / self.seen.frames if self.seen.frames else float("nan")


@dataclass
class Idle:
    server: str
    clients: int
    connected: int
    failed: int
    connect_seconds: float
    connect_p50: float
    connect_p99: float
    before: dict[str, int]
    after: dict[str, int]
    repeat: int = 1

    @property
    def kb_per_connection(self) -> float:
        return (self.after["VmRSS"] - self.before["VmRSS"]) * 1024 / 1000 / max(self.connected, 1)


@dataclass
class Kill:
    server: str
    clients: int
    rate: int
    published: int
    caught_up_s: float  # from the SIGKILL until the last client received a message published after it was back
    back_s: float  # from the SIGKILL until the last client was positioned again (welcome / subscribed)
    recovered_clients: int
    not_caught_up: int
    seen: Outcome
    repeat: int = 1


# How far ahead of the SIGKILL test's publishing its schedule is fixed: time for a publisher process to start.
KILL_SCHEDULE_LEAD_S = 0.5


def run_server(kind: str, clients: int, rates: list[int], args: Any, redis: RedisServer, publisher: Publisher,
               loadgen: GoLoadGen, workdir: Path, filters: int = 0) -> tuple[Idle, list[Phase]]:
    """With ``filters`` K > 0 (sparkwire only), client i subscribes with the filter {"tenant": "t<i mod K>"}
    and the publisher writes K times ``rate`` entries/s, tenants in turn, so each client still receives
    ``rate`` entries/s (bench/loadgen/view.go)."""
    server = make_server(kind, redis, workdir).start()
    try:
        publisher.run(1, 0.5)  # the server follows the stream before the first client
        loadgen.call("connect", proto=kind, urls=[server.url], count=20, concurrency=CONNECT_CONCURRENCY,
                     filters=filters)
        loadgen.call("disconnect")  # the first connections load lazy code paths
        time.sleep(0.5)
        before = settle_rss(server.pid)
        c = loadgen.call("connect", proto=kind, urls=[server.url], count=clients, concurrency=CONNECT_CONCURRENCY,
                         filters=filters)
        after = settle_rss(server.pid, 3.0)
        idle = Idle(kind, clients, c["connected"], c["failed"], c["seconds"], c["p50"], c["p99"], before, after)
        print(f"[{kind}] {clients} clients: {c['connected']} connected in {c['seconds']:.1f}s, idle"
              f" {idle.kb_per_connection:.1f} KB per connection" + (f"; errors {c['errors']}" if c["errors"] else ""),
              file=sys.stderr)
        phases = [run_phase(kind, clients, rate, args, redis, server, publisher, loadgen, filters) for rate in rates]
        loadgen.call("disconnect")
        if not all(p.seen.exactly_once for p in phases) and kind != "naive":
            print(f"{kind} log ends with:\n{server.process.log_tail(40)}", file=sys.stderr)
        return idle, phases
    finally:
        server.stop()


def run_phase(kind: str, clients: int, rate: int, args: Any, redis: RedisServer, server: Server,
              publisher: Publisher, loadgen: GoLoadGen, filters: int = 0) -> Phase:
    per_commit = max(1, round(rate * args.commit_interval_ms / 1000)) * max(filters, 1)
    publisher.run(per_commit, args.warmup)
    redis_pid = redis.process.pid
    assert redis_pid is not None
    cpu0, redis0 = process_cpu_split(server.pid), process_cpu_seconds(redis_pid)
    t0 = loadgen.call("phase_start")["t"]
    # A phase at one message per batch is measured longer (``--one-per-frame-duration``): its CPU is small
    # and a short reading of it moves with the host more than the servers differ.
    duration = args.one_per_frame_duration if per_commit == 1 and not filters else args.duration
    published, seconds = publisher.run(per_commit, duration)
    result = loadgen.call("phase_end", head=publisher.head(), timeout=args.catch_up_timeout)
    cpu1, redis1 = process_cpu_split(server.pid), process_cpu_seconds(redis_pid)
    seen = Outcome.of(result)
    end = result["reached_at"] if not result["behind"] else time.time()
    phase = Phase(kind, clients, rate, per_commit, published, seconds, max(end - t0, 1e-9), sum(cpu1) - sum(cpu0),
                  redis1 - redis0, seen, filters, server_kernel_cpu=cpu1[1] - cpu0[1])
    print(f"[{kind}{f' {filters} filters' if filters else ''}] {clients} clients {rate}/s:"
          f" {phase.delivered_per_s:,.0f}/s, {phase.per_cpu:,.0f} per CPU s"
          f" ({phase.per_frame:.1f}/frame), p50/p99/p999 {seen.latency_ms(0.5):.1f}/{seen.latency_ms(0.99):.1f}/"
          f"{seen.latency_ms(0.999):.1f} ms, exactly once {'yes' if seen.exactly_once else 'NO'}"
          f" (lost {seen.lost}, dup {seen.duplicates}, resets {seen.resets}, behind {seen.behind}, wrong {seen.wrong},"
          f" received {seen.received:,} of {seen.expected:,}, server CPU {phase.server_cpu:.2f} s)"
          + (f"; {seen.errors[:3]}" if seen.errors else ""), file=sys.stderr)
    return phase


def run_kill(kind: str, args: Any, redis: RedisServer, publisher: Publisher, loadgen: GoLoadGen,
             workdir: Path) -> Kill:
    """``args.kill_clients`` clients on server A, a second instance B beside it (another pod behind the
    load balancer: reconnects go round [A, B]); publishing at ``args.kill_rate`` throughout; SIGKILL of A
    ``args.kill_after`` s into it, half-way between two batches; publishing goes on ``args.kill_for`` s more
    (``kill_storm``)."""
    storm = kill_storm(kind, redis, publisher, loadgen, workdir, clients=args.kill_clients,
                       per_commit=max(1, round(args.kill_rate * args.commit_interval_ms / 1000)),
                       interval=args.commit_interval_ms / 1000, warmup=args.warmup, kill_after=args.kill_after,
                       kill_for=args.kill_for, timeout=args.catch_up_timeout)
    result, killed_at = storm.result, storm.killed_at
    seen = Outcome.of(result)
    caught = result["caught_up_at"] - killed_at if result["caught_up_at"] else float("nan")
    back = result["back_at"] - killed_at if result["back_at"] else float("nan")
    kill = Kill(kind, args.kill_clients, args.kill_rate, storm.published, caught, back, result["recovered_clients"],
                result["not_caught_up"], seen)
    print(f"[{kind}] SIGKILL with {args.kill_clients} clients: back after {back:.3f}s, caught up after {caught:.2f}s"
          f" ({kill.recovered_clients} back, {kill.not_caught_up} not), lost {seen.lost}, dup {seen.duplicates},"
          f" resets {seen.resets}, complete {seen.complete}/{seen.clients}"
          f"{', an AOF rewrite of Redis ran during it' if storm.rewrote else ''}", file=sys.stderr)
    if result.get("last_dial_at"):
        p50, p99, slowest = result["positioned_ms"]
        print(f"[{kind}]   the last reconnect dialled {result['last_dial_at'] - killed_at:.3f}s after the SIGKILL;"
              f" dial to positioned p50/p99/max {p50:.1f}/{p99:.1f}/{slowest:.1f} ms;"
              f" {result['retried_clients']} clients needed more than one attempt", file=sys.stderr)
    return kill


@dataclass(frozen=True)
class Storm:
    """One ``kill_storm``: the load generator's ``phase_end`` report, when the SIGKILL was sent, what was
    published, whether Redis rewrote its AOF meanwhile, and the survivor's CPU (user, kernel) in the
    ``cpu_window_s`` after the kill (when asked)."""

    result: dict[str, Any]
    killed_at: float
    published: int
    rewrote: bool
    survivor_cpu: tuple[float, float] | None


def kill_storm(kind: str, redis: RedisServer, publisher: Publisher, loadgen: GoLoadGen, workdir: Path, *,
               clients: int, per_commit: int, interval: float, warmup: float, kill_after: float, kill_for: float,
               timeout: float, cpu_window_s: float | None = None) -> Storm:
    """``clients`` on server A and a second instance B beside it (reconnects go round [A, B]); ``per_commit``
    messages every ``interval`` s throughout; SIGKILL of A ``kill_after`` s in, half-way between two batches;
    publishing goes on ``kill_for`` s more.

    Every server's publisher runs on the same wall-clock grid, started ahead (``KILL_SCHEDULE_LEAD_S``) and
    the kill timed on it. "Caught up" waits for the first batch published after a client is back, and the last
    clients come back just before the end of their 0.5 s backoff: a batch 1 ms before that end or 15 ms after it
    moved a server's figure by a whole batch. Without the grid the centrifuge publisher, a process started on
    demand (10-20 ms here), always had the later phase and sparkwire's thread the earlier one."""
    a = make_server(kind, redis, workdir, "-a").start()
    b = make_server(kind, redis, workdir, "-b").start()
    survivor: list[tuple[float, float]] = []
    try:
        publisher.run(1, 0.5)
        loadgen.call("connect", proto=kind, urls=[a.url, b.url], count=clients, concurrency=CONNECT_CONCURRENCY)
        publisher.run(per_commit, warmup)
        rewrites_before = aof_rewrites(redis)
        loadgen.call("phase_start", watchKill=True)
        start_at = time.time() + KILL_SCHEDULE_LEAD_S
        wait = publisher.run_in_background(per_commit, kill_after + kill_for, start_at)
        time.sleep(max(start_at + kill_after + interval / 2 - time.time(), 0.0))
        before = process_cpu_split(b.pid)
        killed_at = time.time()
        a.kill()
        if cpu_window_s is not None:
            time.sleep(cpu_window_s)
            after = process_cpu_split(b.pid)
            survivor.append((after[0] - before[0], after[1] - before[1]))
        published, _ = wait()
        rewrote = aof_rewrites(redis) != rewrites_before
        result = loadgen.call("phase_end", head=publisher.head(), timeout=timeout)
        loadgen.call("disconnect")
    finally:
        a.stop()
        b.stop()
    return Storm(result, killed_at, published, rewrote, survivor[0] if survivor else None)


def aof_rewrites(redis: RedisServer) -> tuple[int, int]:
    """Redis's AOF rewrites done and in progress: one that falls within a server's SIGKILL test slows that
    server's resumes, not the others' (none should, with ``_servers.REDIS_ARGS``)."""
    info = redis.client(decode_responses=True).info("persistence")
    return int(info["aof_rewrites"]), int(info["aof_rewrite_in_progress"])
