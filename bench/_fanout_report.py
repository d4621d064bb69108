"""The gateway fan-out benchmark's report: its section of docs/benchmarks.md, with its aims (p99
commit->receive, delivered entries per CPU second against Centrifugo's published figure, memory per idle
connection) marked met or not met from the measured numbers."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from _common import closes_text as _closes
from _common import markers, reproduce_lines
from _fanout_measure import Memory, Phase

from sparkwire.gateway.settings import add_arguments as add_gateway_arguments

SECTION = "gateway_fanout"
START_MARKER, END_MARKER = markers(SECTION)
CENTRIFUGO_PER_CPU = 12_500
LATENCY_AIM_MS = 20.0
MEMORY_AIM_KB = 20.0

def _ms(value: float) -> str:
    return f"{value:,.1f}"

def gateway_options(extra: Sequence[str]) -> argparse.Namespace:
    """The options the run's gateways had, read by the gateway's own parser: its defaults (and any SPARKWIRE_*
    variable, which the gateway processes inherit) under the ``--gateway-arg`` flags."""
    parser = argparse.ArgumentParser(add_help=False)
    add_gateway_arguments(parser)
    return parser.parse_args(list(extra))


def _options_line(extra: Sequence[str]) -> str:
    o = gateway_options(extra)
    given = f"`{' '.join(extra)}`, the rest the gateway's defaults" if extra else "the gateway's defaults"
    return (f"- Gateway options: {given} (send queue {o.send_queue:,} batches; clients ack every"
            f" {o.ack_every:,} entries or {o.ack_interval_ms:,} ms, asked less often past {o.acks_per_second:,}"
            f" clients so that all of them together ack about {o.acks_per_second:,} times a second; ring"
            f" {o.ring_size:,} entries; {o.redis_pool_size} Redis connections), {o.log_level} logging; a fresh"
            " gateway per client count")


def _variant_title(variant: str) -> str:
    if not variant:
        return "as deployed (a blocking pool of `--redis-pool-size` connections; acks written in batches)"
    return f"variant: the gateway's `--redis-url` ends in `?{variant}`"


def _aims(phases: list[Phase], memories: list[Memory]) -> list[str]:
    """Each aim against the measured numbers, computed (so the text stays true)."""
    out = ["### Against the aims", ""]
    for variant in dict.fromkeys(p.variant for p in phases):
        runs = [p for p in phases if p.variant == variant and not p.deflate]
        small = [p for p in runs if p.clients <= 1000]
        label = "as deployed" if not variant else f"with `?{variant}`"
        if small:
            met = [p for p in small if p.latency_ms(0.99) <= LATENCY_AIM_MS and p.exactly_once]
            missed = [p for p in small if p not in met]
            verdict = "**met**" if not missed else "**not met**" if not met else "**met only in part**"
            out.append(
                f"- p99 commit->receive <= {LATENCY_AIM_MS:.0f} ms at {max(p.clients for p in small):,} clients on"
                f" one pod, {label}: {verdict}"
                + (f"; met at {', '.join(f'{p.rate:,}/s (p99 {_ms(p.latency_ms(0.99))} ms)' for p in met)}"
                   if met else "")
                + (f"; missed at {', '.join(f'{p.rate:,}/s (p99 {_ms(p.latency_ms(0.99))} ms)' for p in missed)}"
                   if missed else "")
                + "."
            )
        if runs:
            best = max(runs, key=lambda p: p.per_cpu)
            # like with like: runs whose frames carried about one entry each (an overloaded gateway batches
            # several commits into one frame, and replays after reconnects come in large frames)
            single = [p for p in runs if p.frames and p.received / p.frames <= 1.2]
            out.append(
                f"- Delivered entries per gateway CPU second, {label}, vs Centrifugo's ~{CENTRIFUGO_PER_CPU:,}"
                f" messages/s per CPU: best {best.per_cpu:,.0f} ({best.per_cpu / CENTRIFUGO_PER_CPU:.1f}x) at"
                f" {best.clients:,} clients with {best.per_commit} entries per commit"
                f" ({best.received / best.frames if best.frames else 0:,.1f} per frame); "
                + ("at about one entry per frame, the closest to one Centrifugo message: "
                   + ", ".join(f"{p.per_cpu:,.0f} at {p.clients:,} clients and {p.rate:,}/s"
                               f" ({p.per_cpu / CENTRIFUGO_PER_CPU:.2f}x)" for p in single)
                   if single else "no run delivered about one entry per frame")
                + "."
            )
        closed = [p for p in phases if p.variant == variant and p.close_codes]
        if closed:
            out.append(
                f"- Server closes, {label}: " + "; ".join(
                    f"{p.clients:,} clients at {p.rate:,}/s: {_closes(p.close_codes)}, {p.reconnects:,} reconnects"
                    for p in closed)
                + " (the clients resumed from their cursors; the closes cost CPU and latency)."
            )
    seen: set[tuple[int, bool]] = set()
    for memory in memories:  # the pool variant does not change idle memory: first measurement per kind
        if (memory.clients, memory.deflate) in seen:
            continue
        seen.add((memory.clients, memory.deflate))
        kb = memory.per_connection_kb()
        verdict = "**met**" if kb <= MEMORY_AIM_KB else "**not met**"
        deflate = ", compression on and negotiated (`--per-message-deflate`)" if memory.deflate else ""
        out.append(f"- <= {MEMORY_AIM_KB:.0f} KB per idle connection ({memory.connected:,} clients{deflate}):"
                   f" {verdict}, {kb:.1f} KB of gateway RSS per connection.")
    failed = [p for p in phases if not p.exactly_once]
    if failed:
        out.append("- **Not exactly once** in " + "; ".join(
            f"{p.clients:,} clients at {p.rate:,}/s, {p.label} ({p.complete:,}/{p.clients:,} complete,"
            f" {p.received:,}/{p.expected:,} entries, {p.behind} behind, {p.resets} snapshot resets,"
            f" {p.dead} gave up)" for p in failed) + ".")
    else:
        out.append("- Every client received every committed seq exactly once and in order, in every run"
                   " (across its reconnects, if any).")
    return out


def render(args: argparse.Namespace, command: str, info: dict[str, str], memories: list[Memory],
           phases: list[Phase], payload: str, entry_bytes: int, load_before: tuple[float, float, float],
           load_after: tuple[float, float, float], wall_seconds: float, date: str) -> str:
    lines = [
        START_MARKER,
        "## Gateway fan-out: delivered entries per CPU second, commit->receive latency, memory per connection",
        "",
        "One gateway pod (`sparkwire gateway`: uvicorn, one process, uvloop, websockets-sansio) on a real",
        "`redis-server` (AOF, `appendfsync always`), N WebSocket clients connected to it, commits through the",
        "real commit script (`sparkwire_harness.stack.Committer`) at a fixed cadence. *Delivered* counts entries",
        "received by clients (an entry sent to 1,000 clients counts 1,000 times); it is divided by the",
        "gateway's own CPU time (utime+stime of its process from `/proc/<pid>/stat`), so the efficiency",
        "figure does not depend on how much CPU the load generator or other work took from the machine.",
        "",
        *reproduce_lines(date, wall_seconds, command),
        _options_line(args.gateway_arg),
        f"- Commits: one `commit_batch` every {args.commit_interval_ms} ms (rate x"
        f" {args.commit_interval_ms / 1000:g} s entries each), {args.warmup:g} s warm-up, then {args.duration:g} s"
        f" measured; payload `{payload[:20]}…` = {len(payload)} bytes, about {entry_bytes} bytes per entry in an"
        " `entries` frame",
        f"- Clients: raw WebSocket clients in {args.workers} load-generator processes (one uvloop event loop"
        " each) on the same machine: hello without session, welcome, snapshot, then entries; acks coalesced as"
        " the welcome asks; pongs; on a resumable close, a reconnect with session and cursor (full-jitter"
        " backoff from 0.5 s, as docs/protocol.md asks). No permessage-deflate unless marked *deflate*"
        " (browsers offer it by default).",
        "- Exactly once: each client checks that the seqs of every frame continue its last seq without hole,"
        " repeat or disorder (across reconnects), and at the end of each run every client must have reached the"
        " last committed seq without a snapshot reset; received entries must equal the sum over clients of"
        " (last seq - seq at the run's start).",
        "- Latency: receive time in the load generator (`time.time()` when the frame's bytes arrived) minus"
        " the entry's `commitMs` (Redis `TIME` at the start of the commit script, truncated to the ms, so"
        " up to +1 ms); it includes the script, the AOF fsync, XREAD wake-up, the hub, the per-connection"
        " queue and send, loopback TCP and the load generator's own scheduling delay. 0.1 ms histogram,"
        " nearest rank.",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}; Redis"
        f" {info['redis']}, redis-py {info['redis_py']}, Python {info['python']}",
        f"- **The machine is shared**: load average {load_before[0]:.2f} / {load_before[1]:.2f} /"
        f" {load_before[2]:.2f} (1/5/15 min) before, {load_after[0]:.2f} after. The gateway, `redis-server`,"
        f" the committer and the load generator all run on these {info['nproc']} CPUs, next to other work;"
        " latency and delivered/s suffer from that, CPU seconds per entry much less.",
        "",
        "Columns: *rate* = commit rate asked for (measured), *per commit* = entries per commit; *delivered/s* =",
        "entries received by all clients per second of the run (first measured commit until the last client",
        "has the last seq); *gateway CPU* = its CPU seconds in the run and as a share of one CPU;",
        "*per gateway CPU s* = delivered / gateway CPU; *acks/s* = ack frames the clients sent (each one a",
        "session write to Redis by the gateway); *µs/frame* = gateway CPU per WebSocket frame the clients",
        "received (acks included); *load-gen* / *Redis* = CPU seconds of all load-generator processes / of",
        "`redis-server`; *server closes* = connections the gateway closed (count x close code) and the",
        "reconnects that followed; *exactly once* = clients complete / clients.",
    ]
    for variant in dict.fromkeys(p.variant for p in phases):
        lines += [
            "",
            f"### Delivery, {_variant_title(variant)}",
            "",
            "| clients | rate entries/s | per commit | delivered/s | frames/s | acks/s | gateway CPU s (%)"
            " | per gateway CPU s | µs/frame | p50 / p99 / max ms | load-gen / Redis CPU s | server closes (reconnects)"
            " | exactly once |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for p in (p for p in phases if p.variant == variant):
            deflate = " deflate" if p.deflate else ""
            once = f"{p.complete:,}/{p.clients:,}" + (" yes" if p.exactly_once else " **NO**")
            closes = _closes(p.close_codes) + (f" ({p.reconnects:,})" if p.close_codes else "")
            lines.append(
                f"| {p.clients:,}{deflate} | {p.rate:,} ({p.commit_rate:,.0f}) | {p.per_commit}"
                f" | {p.delivered_per_s:,.0f} | {p.frames / p.wall if p.wall else 0:,.0f}"
                f" | {p.acks / p.wall if p.wall else 0:,.0f}"
                f" | {p.gateway_cpu:.2f} ({p.gateway_cpu / p.wall if p.wall else 0:.0%}) | {p.per_cpu:,.0f}"
                f" | {p.gateway_cpu / p.frames * 1e6 if p.frames else float('nan'):,.0f}"
                f" | {_ms(p.latency_ms(0.5))} / {_ms(p.latency_ms(0.99))} / {_ms(p.latency_max_ms)}"
                f" | {p.loadgen_cpu:.2f} / {p.redis_cpu:.2f} | {closes} | {once} |"
            )
    lines += [
        "",
        "### Memory per connection",
        "",
        "Gateway RSS (`VmRSS`; PSS from `smaps_rollup` in brackets) before the clients connected (after 20",
        "warm-up connections came and went), with them connected and idle (after welcome and snapshot, no",
        "commits), and after the delivery runs with the clients still connected (this includes the pod's ring of",
        "up to 10,000 recent entries, so it is an upper bound per connection). Kernel socket buffers are not in",
        "these figures. *Connect* = seconds until all clients had their snapshot; connections the server",
        "closed while clients connected and retried are listed.",
        "",
        "| clients | gateway | RSS before MiB | RSS idle MiB | per idle connection KB | RSS after the runs MiB"
        " | per connection after the runs KB | connect s | server closes while connecting |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in memories:
        deflate = f", deflate ({m.deflate_negotiated:,} negotiated)" if m.deflate else ""
        after_runs = m.after_runs or m.after
        lines.append(
            f"| {m.connected:,} | {'as deployed' if not m.variant else f'`?{m.variant}`'}{deflate}"
            f" | {m.before['VmRSS'] / 1024:.1f} | {m.after['VmRSS'] / 1024:.1f}"
            f" | {m.per_connection_kb():.1f} ({m.per_connection_kb('Pss'):.1f}) | {after_runs['VmRSS'] / 1024:.1f}"
            f" | {m.per_connection_kb(after=after_runs):.1f} | {m.connect_seconds:.1f} | {_closes(m.close_codes)} |"
        )
    lines += ["", *_aims(phases, memories), ""]
    lines += [
        "Centrifugo reference: its published test (centrifugal.dev/blog/2020/02/10/million-connections-with-",
        "centrifugo) delivered about 500k messages/s to 1M connections from 20 server pods; that is taken",
        f"as about {CENTRIFUGO_PER_CPU:,} delivered messages/s per CPU. Each of its messages is a separate",
        "publication and frame (Protobuf protocol, a Go server); here an entry is one JSON object of a batched",
        "`entries` frame, so only runs with about one entry per frame compare like with like; larger commits",
        "(and an overloaded hub reading several commits at once) share a frame's cost among their entries.",
        END_MARKER,
    ]
    return "\n".join(lines) + "\n"
