"""Abuse benchmark: a real gateway serving honest clients while connections of every
abusive kind come and go, and what that costs the gateway and the honest clients.

Method. One ``redis-server`` (AOF, ``appendfsync always``) and, per run, a fresh gateway process (``sparkwire
gateway`` under uvicorn, auth on: HS256 tokens minted with ``sparkwire.gateway.auth.tokens.issue_token``) serving one
fresh stream, into which the harness's ``Committer`` commits 5 entries every 50 ms (100 entries/s) through the
real commit script. ``--honest-clients`` ``StreamClient``s connect before the first commit (so each starts from
the empty stream's snapshot at seq 0 and must then apply every committed seq once) and read throughout; per
entry the commit → receive latency (the entry's ``commitMs``, Redis's clock, against this machine's clock when
the client applied it; same host).

Two runs, one after the other, with the same clients, commits and gateway options:

1. *idle*: ``--baseline-seconds`` with no churn;
2. *churn*: ``--minutes`` with ``--attack-rate`` attack connections a second started by a separate process
   (``bench/_abuse_attack.py``: asyncio, the ``websockets`` library and raw sockets, 127.0.0.1 only; at most
   ``--max-in-flight`` open at once, each bounded in time), round-robin over 19 kinds: no hello, a hello
   dribbled in fragments past the hello timeout, a whole hello at 80 % of it, garbage text and binary first
   frames, invalid UTF-8 before and after the hello, a 10 KiB first frame and a 100 KiB frame after the hello,
   a flood of ``--flood-pings`` (2,000) pings after a hello over WebSocket and in one SSE ``POST /sse/frames``
   body (every pong read), tokens that are garbage, forged (another secret), expired, with a string ``exp``,
   or for another stream, a valid hello and leave, an upgrade whose headers come one line every 0.5 s
   (slowloris), and a TCP connection that sends nothing.

Every second the gateway's VmRSS (``/proc/<pid>/status``), open fds (``/proc/<pid>/fd``) and utime+stime
(``/proc/<pid>/stat``) are sampled; a row per ``--row-seconds`` gives them with the CPU over the row, the
attacks started in it and the honest clients' latency in it. At the end: RSS growth after warm-up (the largest
and the last sample after ``--warmup-seconds`` against the median of the 10 s ending there; at most 5 %), each
honest client against the log (seqs 1..head each applied once and in order, no duplicate dropped, no gap, no
snapshot but the first), p50/p99/max latency of the churn run beside the idle run's, and how each attack kind's
connections ended beside what the docs say.

The gateway runs with shorter timeouts than deployed so that churn turns over faster: ``--hello-timeout-ms``
and ``--header-timeout-ms`` (2,000 each here, 10,000 deployed; ``--gateway-hello-timeout-ms``,
``--gateway-header-timeout-ms``); everything else as deployed (``--max-connections`` 20,000, frame limit 8 KiB,
ring of 10,000 entries, which 100 entries/s fill in 100 s: the default warm-up is 120 s, capped at a third of a
short run).

    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/abuse.py --out docs/benchmarks.md   # ~12 minutes
    flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/abuse.py --minutes 0.5 --baseline-seconds 15  # smoke

The tables go to stdout; ``--out docs/benchmarks.md`` rewrites this benchmark's marked section there, any
other path is written whole. Exit status 1 when RSS grew more than 5 % or an honest client was not exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _abuse_attack import EXPECTED, KINDS
from _abuse_stats import (
    RSS_AIM_PCT,
    Delivery,
    Growth,
    Latency,
    PhaseSummary,
    Sample,
    delivery,
    latency_quantiles,
    outcomes_table,
    rows,
    rows_table,
    rss_growth,
    summary_table,
)
from _common import (
    machine_info,
    markers,
    process_cpu_seconds,
    process_memory_kib,
    raise_open_files,
    reproduce_lines,
    write_section,
)

from sparkwire.client import StreamClient
from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

SECTION = "abuse"
REPO = Path(__file__).resolve().parent.parent
ATTACKER = Path(__file__).resolve().parent / "_abuse_attack.py"
PER_BATCH, INTERVAL = 5, 0.05  # 100 entries/s
RING_FILL_S = 100  # the gateway's default ring (10,000 entries) at 100 entries/s


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the churn run")
    parser.add_argument("--baseline-seconds", type=float, default=60.0, help="length of the idle run before it")
    parser.add_argument("--honest-clients", type=int, default=10, help="StreamClients reading throughout")
    parser.add_argument("--attack-rate", type=float, default=100.0, help="attack connections started per second")
    parser.add_argument("--max-in-flight", type=int, default=2_000, help="attack connections open at most")
    parser.add_argument("--flood-pings", type=int, default=2_000, help="pings per ping flood (WebSocket and SSE)")
    parser.add_argument("--row-seconds", type=float, default=30.0, help="one table row per this many seconds")
    parser.add_argument("--warmup-seconds", type=float, default=120.0,
                        help="RSS growth is measured after this (at most a third of the churn run)")
    parser.add_argument("--gateway-hello-timeout-ms", type=int, default=2_000)
    parser.add_argument("--gateway-header-timeout-ms", type=int, default=2_000)
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the tables here (docs/benchmarks.md: its marked section only)")
    return parser.parse_args(argv)


@dataclass
class Phase:
    name: str
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    latencies: list[Latency] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    attacker_cpu_s: float = 0.0  # the attack process's utime+stime, last seen
    own_cpu_s: float = 0.0  # this process's over the phase: the honest clients and the committer
    log_tail: str = ""

    def summary(self, clients: int) -> PhaseSummary:
        first, last = self.samples[0], self.samples[-1]
        cpu = 100.0 * (last.cpu_s - first.cpu_s) / (last.t - first.t) if last.t > first.t else float("nan")
        return PhaseSummary(self.name, last.t, clients, self.deliveries, [x.ms for x in self.latencies], cpu,
                            first.rss_kib, last.rss_kib, first.fds, last.fds, last.attacks)


def sample(pid: int, t: float, attacks: int) -> Sample:
    return Sample(t, process_memory_kib(pid)["VmRSS"], len(os.listdir(f"/proc/{pid}/fd")),
                  process_cpu_seconds(pid), attacks)


def attacks_started(progress: Path) -> int:
    try:
        lines = progress.read_text().splitlines()
    except FileNotFoundError:
        return 0
    return int(json.loads(lines[-1])["started"]) if lines else 0


async def run_phase(args: argparse.Namespace, redis_server: RedisServer, workdir: Path, name: str, seconds: float,
                    *, churn: bool) -> Phase:
    stream = f"honest-{name}"
    secret = secrets.token_hex(32)
    gateway = GatewayProcess(workdir, redis_server.url, [stream], "--host", "127.0.0.1", "--hello-timeout-ms",
                             str(args.gateway_hello_timeout_ms), "--header-timeout-ms",
                             str(args.gateway_header_timeout_ms), auth_secret=secret).start()
    pid = gateway.process.pid
    assert pid is not None
    phase = Phase(name, seconds)
    began = time.monotonic()
    token = issue_token(secret, [stream], int(seconds + args.baseline_seconds + 900), subject="honest",
                        now=int(time.time()))
    applied: list[list[int]] = [[] for _ in range(args.honest_clients)]

    def on_entry(index: int) -> Callable[[ReceivedEntry], None]:
        def record(entry: ReceivedEntry) -> None:
            applied[index].append(entry.seq)
            phase.latencies.append(Latency(time.monotonic() - began, time.time() * 1000 - entry.commit_ms))
        return record

    clients = [StreamClient(gateway.ws(stream), token=token, on_entry=on_entry(i))
               for i in range(args.honest_clients)]
    tasks = [asyncio.create_task(c.run()) for c in clients]
    committer = Committer(redis_server.client(), stream, per_batch=PER_BATCH, interval=INTERVAL)
    attacker: subprocess.Popen[str] | None = None
    progress = workdir / f"attack-progress-{name}.jsonl"
    try:
        for client in clients:
            await client.wait_until(lambda c=client: c.session.welcomes >= 1, timeout=30)  # type: ignore[misc]
        began = time.monotonic()
        phase.samples.append(sample(pid, 0.0, 0))
        committer.start()
        if churn:
            attacker = subprocess.Popen(
                [sys.executable, str(ATTACKER), "--port", str(gateway.port), "--stream", stream,
                 "--rate", str(args.attack_rate), "--seconds", str(seconds),
                 "--hello-timeout-s", str(args.gateway_hello_timeout_ms / 1000),
                 "--header-timeout-s", str(args.gateway_header_timeout_ms / 1000),
                 "--max-in-flight", str(args.max_in_flight), "--pings", str(args.flood_pings),
                 "--progress", str(progress), "--progress-seconds", "1"],
                stdout=subprocess.PIPE, stderr=open(workdir / f"attacker-{name}.log", "w"),  # noqa: SIM115
                text=True, env={**os.environ, "SPARKWIRE_AUTH_SECRET": secret})
        own_cpu = time.process_time()
        row_sample, row_latency, tick = 0, 0, 1
        while time.monotonic() - began < seconds:
            await asyncio.sleep(max(0.0, began + tick - time.monotonic()))
            tick += 1
            phase.samples.append(sample(pid, time.monotonic() - began, attacks_started(progress)))
            if attacker is not None:
                with contextlib.suppress(OSError, IndexError, ValueError):  # it may have just ended
                    phase.attacker_cpu_s = process_cpu_seconds(attacker.pid)
            if phase.samples[-1].t >= phase.samples[row_sample].t + args.row_seconds:  # progress on stderr
                [last] = rows(phase.samples[row_sample:], phase.latencies[row_latency:], 1e9)
                row_sample, row_latency = len(phase.samples) - 1, len(phase.latencies)
                print(f"[abuse {name}] t={last.end:.0f}s RSS {last.rss_kib / 1024:.1f} MiB fds {last.fds} "
                      f"CPU {last.cpu_pct:.0f}% attacks {last.attacks} entries {last.entries} "
                      f"p50 {last.p50:.0f} p99 {last.p99:.0f} ms", file=sys.stderr, flush=True)
        phase.own_cpu_s = time.process_time() - own_cpu
        committer.stop()
        if attacker is not None:
            out, _ = await asyncio.to_thread(attacker.communicate, timeout=120)
            phase.outcomes = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        phase.samples.append(sample(pid, time.monotonic() - began, attacks_started(progress)))
        head = committer.committed
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(len(a) < head for a in applied):
            await asyncio.sleep(0.2)
        for index, client in enumerate(clients):
            stats = client.stats()
            phase.deliveries.append(delivery(applied[index], head, duplicates_dropped=stats.duplicates,
                                             gaps=stats.gaps, snapshots=sum(stats.resets.values())))
    finally:
        committer.stop()
        if attacker is not None and attacker.poll() is None:
            attacker.kill()
            attacker.wait()
        for client in clients:
            await client.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        phase.log_tail = gateway.process.log_tail(5)
        gateway.stop()
    return phase


@dataclass(frozen=True)
class Report:
    text: str
    growth: Growth
    ok: bool


def render(args: argparse.Namespace, idle: Phase, churn: Phase, *, info: dict[str, str], date: str, wall: float,
           command: str) -> Report:
    warmup = min(args.warmup_seconds, churn.seconds / 3)
    growth = rss_growth(churn.samples, warmup)
    idle_summary, churn_summary = idle.summary(args.honest_clients), churn.summary(args.honest_clients)
    once = all(d.exactly_once for d in (*idle.deliveries, *churn.deliveries))
    i50, i99, _ = latency_quantiles(idle_summary.latencies_ms)
    c50, c99, _ = latency_quantiles(churn_summary.latencies_ms)
    start, end = markers(SECTION)
    lines = [
        start,
        "## Abuse: connection churn of every kind against a gateway serving honest clients",
        "",
        f"One gateway process (auth on) on a real `redis-server`, {PER_BATCH * round(1 / INTERVAL)} entries/s "
        f"committed through the commit script, {args.honest_clients} honest `StreamClient`s reading throughout; "
        f"first {idle.seconds:.0f} s with no churn (*idle*), then a fresh gateway for {churn.seconds / 60:.1f} "
        f"minutes under {args.attack_rate:,.0f} attack connections a second (*churn*, {len(KINDS)} kinds "
        f"round-robin from a separate process, at most {args.max_in_flight:,} open at once). Generated by "
        "`bench/abuse.py` (method in its docstring).",
        "",
        *reproduce_lines(date, wall, f"flock /tmp/sparkwire-heavy.lock {command}"),
        f"- Machine: {info['nproc']} CPUs "
        f"({info['cpu']}), {info['ram']} RAM; Redis {info['redis']}, Python {info['python']}.",
        f"- Gateway options shortened so that churn turns over faster: `--hello-timeout-ms "
        f"{args.gateway_hello_timeout_ms}`, `--header-timeout-ms {args.gateway_header_timeout_ms}` (10,000 each "
        "deployed); everything else as deployed (`--max-connections` 20,000, 8 KiB client frames, ring of 10,000).",
        f"- Everything on this one machine, nothing pinned: the attack process used "
        f"{100 * churn.attacker_cpu_s / churn.seconds:,.0f} % of a core over the churn run; the honest clients and "
        f"the committer (one process) {100 * idle.own_cpu_s / idle.seconds:,.0f} % idle, "
        f"{100 * churn.own_cpu_s / churn.seconds:,.0f} % under churn. Ping floods: {args.flood_pings:,} pings each.",
        f"- **RSS after warm-up ({growth.warmup_s:.0f} s): {growth.reference_kib / 1024:,.1f} MiB → at most "
        f"{growth.max_kib / 1024:,.1f} MiB ({growth.max_pct:+.1f} %), {growth.end_kib / 1024:,.1f} MiB at the end "
        f"({growth.end_pct:+.1f} %): {'within' if growth.flat else 'NOT within'} {RSS_AIM_PCT:.0f} %.**"
        + ("" if growth.warmup_s >= RING_FILL_S else f" Not a verdict on leaks: a warm-up under {RING_FILL_S} s "
           "ends before the ring of recent entries is full, so the growth includes the ring filling."),
        f"- **Honest clients exactly once: {'yes' if once else 'NO'}** (every committed seq applied once, in "
        "order, no duplicate dropped, no gap, no snapshot but the first), in both runs.",
        f"- Honest commit → receive latency, idle vs churn: p50 {i50:,.0f} → {c50:,.0f} ms, p99 {i99:,.0f} → "
        f"{c99:,.0f} ms.",
        "",
        *summary_table([idle_summary, churn_summary]),
        "",
        "The churn run over time:",
        "",
        *rows_table(rows(churn.samples, churn.latencies, args.row_seconds)),
        "",
        "How the attack connections ended:",
        "",
        *outcomes_table(churn.outcomes, EXPECTED),
        "",
        end,
        "",
    ]
    return Report("\n".join(lines), growth, once and growth.flat)


async def measure(args: argparse.Namespace, workdir: Path) -> tuple[Phase, Phase, dict[str, str]]:
    with RedisServer(workdir / "redis") as redis_server:
        info = machine_info(redis_server.client())
        idle = await run_phase(args, redis_server, workdir, "idle", args.baseline_seconds, churn=False)
        churn = await run_phase(args, redis_server, workdir, "churn", args.minutes * 60, churn=True)
    return idle, churn, info


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    raise_open_files(args.max_in_flight * 2 + args.honest_clients + 1_024)
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="abuse-") as tmp:
        (Path(tmp) / "redis").mkdir()
        idle, churn, info = asyncio.run(measure(args, Path(tmp)))
    report = render(args, idle, churn, info=info, date=date, wall=time.monotonic() - started,
                    command=shlex.join([".venv/bin/python", "bench/abuse.py", *argv]))
    sys.stdout.write(report.text)
    if args.out is not None:
        if args.out.name == "benchmarks.md":
            write_section(args.out, SECTION, report.text)
        else:
            args.out.write_text(report.text)
        print(f"wrote {args.out}", file=sys.stderr)
    if not report.growth.flat:
        print(f"[abuse] RSS grew {report.growth.max_pct:+.1f} % after the warm-up", file=sys.stderr)
    for phase in (idle, churn):
        bad = [d for d in phase.deliveries if not d.exactly_once]
        if bad:
            print(f"[abuse {phase.name}] {len(bad)} honest clients not exactly once, e.g. {bad[:3]}\n"
                  f"gateway log tail:\n{phase.log_tail}", file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
