"""The side-by-side section of docs/benchmarks.md: every figure of every server with its ratio to the
centrifuge peer, and its aims marked met or not met from the numbers themselves."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from _common import closes_text, markers
from _sbs_measure import Idle, Kill, Phase

SECTION = "side_by_side"
PEER = "centrifuge"
NAMES = {"sparkwire": "sparkwire gateway", "centrifuge": "centrifuge peer", "naive": "naive pub/sub"}
LATENCY_AIM_MS, LARGE_LATENCY_AIM_MS, MEMORY_AIM_KB = 20.0, 200.0, 20.0


@dataclass
class Context:
    args: argparse.Namespace
    command: str
    info: dict[str, str]
    date: str
    wall: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]


def _num(value: float, digits: int = 0) -> str:
    return "n/a" if math.isnan(value) or math.isinf(value) else f"{value:,.{digits}f}"


def _ratio(value: float, peer: float | None) -> str:
    if peer is None or not peer or math.isnan(value) or math.isnan(peer):
        return ""
    return f" ({value / peer:.2f}x)"


def _peer_of(items: Sequence[Phase], p: Phase) -> Phase | None:
    return next((q for q in items if q.server == PEER and q.clients == p.clients and q.rate == p.rate), None)


def _once(p: Phase | Kill) -> str:
    s = p.seen
    if s.exactly_once:
        return f"{s.complete:,}/{s.clients:,} yes"
    parts = [f"{n:,} {what}" for n, what in ((s.lost, "lost"), (s.duplicates, "duplicated"),
                                             (s.resets, "resets"), (s.behind, "behind")) if n]
    return f"{s.complete:,}/{s.clients:,} **no**: " + ", ".join(parts or ["incomplete"])


def delivery_table(phases: Sequence[Phase]) -> list[str]:
    lines = ["| clients | rate msg/s | server | delivered/s | msgs/frame | server CPU s | delivered per server CPU s"
             " (x peer) | p50 / p99 / p999 ms (p99 x peer) | Redis CPU s | load-gen CPU s | exactly once |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for p in sorted(phases, key=lambda p: (p.clients, p.rate, p.server != "sparkwire", p.server)):
        peer = _peer_of(phases, p)
        lines.append(
            f"| {p.clients:,} | {p.rate:,} | {NAMES[p.server]} | {_num(p.delivered_per_s)} | {_num(p.per_frame, 1)}"
            f" | {p.server_cpu:.2f} | {_num(p.per_cpu)}{_ratio(p.per_cpu, peer.per_cpu if peer else None)}"
            f" | {_num(p.seen.latency_ms(0.5), 1)} / {_num(p.seen.latency_ms(0.99), 1)} /"
            f" {_num(p.seen.latency_ms(0.999), 1)}"
            f"{_ratio(p.seen.latency_ms(0.99), peer.seen.latency_ms(0.99) if peer else None)}"
            f" | {p.redis_cpu:.2f} | {p.seen.loadgen_cpu:.2f} | {_once(p)} |")
    return lines


def memory_table(idles: Sequence[Idle]) -> list[str]:
    lines = ["| clients | server | connected | RSS before MiB | RSS idle MiB | KB per idle connection (x peer)"
             " | connect all s (x peer) | per client p50 / p99 ms |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for m in sorted(idles, key=lambda m: (m.clients, m.server != "sparkwire", m.server)):
        peer = next((q for q in idles if q.server == PEER and q.clients == m.clients), None)
        lines.append(
            f"| {m.clients:,} | {NAMES[m.server]} | {m.connected:,}" + (f" ({m.failed:,} failed)" if m.failed else "")
            + f" | {m.before['VmRSS'] / 1024:.1f} | {m.after['VmRSS'] / 1024:.1f}"
            f" | {m.kb_per_connection:.1f}{_ratio(m.kb_per_connection, peer.kb_per_connection if peer else None)}"
            f" | {m.connect_seconds:.2f}{_ratio(m.connect_seconds, peer.connect_seconds if peer else None)}"
            f" | {m.connect_p50 * 1000:.1f} / {m.connect_p99 * 1000:.1f} |")
    return lines


def kill_table(kills: Sequence[Kill]) -> list[str]:
    lines = ["| server | clients | msg/s | every client caught up after s (x peer) | clients back / not caught up"
             " | lost | duplicated | resets | reconnects | server closes seen | exactly once |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    peer = next((k for k in kills if k.server == PEER), None)
    for k in kills:
        lines.append(
            f"| {NAMES[k.server]} | {k.clients:,} | {k.rate:,} | {_num(k.caught_up_s, 2)}"
            f"{_ratio(k.caught_up_s, peer.caught_up_s if peer else None)}"
            f" | {k.recovered_clients:,} / {k.not_caught_up:,}"
            f" | {k.seen.lost:,} | {k.seen.duplicates:,} | {k.seen.resets:,} | {k.seen.reconnects:,}"
            f" | {closes_text(k.seen.close_codes)} | {_once(k)} |")
    return lines


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else "**met**" if ok else "**not met**"


def aims(phases: Sequence[Phase], idles: Sequence[Idle]) -> list[str]:
    """The aims, each computed from the tables (so the text stays true)."""
    mine = [p for p in phases if p.server == "sparkwire"]

    def find(pred: Callable[[Phase], bool]) -> list[Phase]:
        return [p for p in mine if pred(p)]

    small = find(lambda p: p.clients == 1000)
    large = find(lambda p: p.clients == max((q.clients for q in mine), default=0) and p.clients >= 10_000)
    single = [p for p in mine if p.rate == min(q.rate for q in mine)] if mine else []
    mem = next((m for m in idles if m.server == "sparkwire" and m.clients == 1000), None)
    out = ["### Against the aims", ""]
    ok = all(p.seen.latency_ms(0.99) <= LATENCY_AIM_MS for p in small) if small else None
    out.append(f"- p99 ≤ {LATENCY_AIM_MS:.0f} ms at 1,000 clients on one pod: {_verdict(ok)}"
               + "".join(f"; {p.rate}/s: p99 {_num(p.seen.latency_ms(0.99), 1)} ms" for p in small) + ".")
    ok = mem.kb_per_connection <= MEMORY_AIM_KB if mem else None
    out.append(f"- ≤ {MEMORY_AIM_KB:.0f} KB per idle connection: {_verdict(ok)}"
               + (f"; {mem.kb_per_connection:.1f} KB at 1,000 clients" if mem else "")
               + "".join(f", {m.kb_per_connection:.1f} KB at {m.clients:,}" for m in idles
                         if m.server == "sparkwire" and m.clients != 1000) + ".")
    ok = (all(p.seen.latency_ms(0.99) <= LARGE_LATENCY_AIM_MS and p.seen.exactly_once for p in large)
          if large else None)
    out.append(f"- 10,000 connections on one pod with p99 ≤ {LARGE_LATENCY_AIM_MS:.0f} ms: {_verdict(ok)}"
               + "".join(f"; {p.rate}/s: p99 {_num(p.seen.latency_ms(0.99), 1)} ms" for p in large) + ".")
    ratios = [(p, p.per_cpu / q.per_cpu) for p in single if (q := _peer_of(phases, p)) is not None and q.per_cpu]
    ok = all(r >= 1.0 for _, r in ratios) if ratios else None
    out.append(f"- ≥ 1.0x the centrifuge peer's delivered messages per CPU second at one message per frame:"
               f" {_verdict(ok)}" + "".join(
                   f"; {p.clients:,} clients: {r:.2f}x ({_num(p.per_frame, 1)} vs {_num(q.per_frame, 1)} msgs/frame)"
                   for p, r in ratios if (q := _peer_of(phases, p)) is not None) + "."
               + (" A server that falls behind packs several messages per frame, which flatters its ratio: only the"
                  " rows at 1.0 msgs/frame for both compare like with like." if ratios else ""))
    return out


def render(ctx: Context, idles: Sequence[Idle], phases: Sequence[Phase], kills: Sequence[Kill]) -> str:
    args, info = ctx.args, ctx.info
    start, end = markers(SECTION)
    lines = [
        start,
        "## Side by side: sparkwire's gateway, the Centrifugo engine, a naive pub/sub floor",
        "",
        "Three servers under the same load from one compiled load generator (`bench/loadgen`, Go), in one run:",
        "",
        "- **sparkwire gateway**: `sparkwire gateway` (uvicorn, one process = one pod, `--insecure-no-auth`),",
        "  fed by `sparkwire_harness.stack.Committer` through the real commit script; exactly once (replay log,",
        "  resume); live batches written straight to caught-up sockets",
        "  (`services/sparkwire/gateway/transport/uvicorn_websocket.py`).",
        "- **centrifuge peer** (`bench/peers/centrifuge`): `github.com/centrifugal/centrifuge` v0.40.1, the",
        "  engine of Centrifugo, with its Redis broker, history (1,000,000 publications, 1 h) and a positioned,",
        "  recoverable channel (what Centrifugo runs with `force_recovery` + `force_positioning`); JSON protocol;",
        "  fed by the same binary's `publish` (a separate process, publications of a batch sent concurrently so",
        "  they are pipelined). Centrifugo itself is not served by the Go module proxy here; its engine is.",
        "- **naive pub/sub** (`bench/peers/naive_pubsub.py`): Starlette on uvicorn broadcasting one Redis pub/sub",
        "  channel, one `PUBLISH` per batch; no history, no resume: the floor that shows what exactly-once costs.",
        "",
        f"Run {ctx.date}, {ctx.wall / 60:.1f} min wall time. Reproduce with (`make bench-peers`):",
        "",
        "```sh",
        f"flock /tmp/sparkwire-heavy.lock {ctx.command}",
        "```",
        "",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}; Redis {info['redis']}"
        f" (AOF, `appendfsync always`, one instance for all servers), Python {info['python']}.",
        "- Pinning: each server runs with `taskset -c 0`, the load generator with `taskset -c 1`; `redis-server`"
        " and the publishers are not pinned (they share both CPUs). The machine is shared with other work:"
        f" load average {ctx.load_before[0]:.2f} / {ctx.load_before[1]:.2f} / {ctx.load_before[2]:.2f} before,"
        f" {ctx.load_after[0]:.2f} after; the whole run held `/tmp/sparkwire-heavy.lock`.",
        f"- Load: {', '.join(f'{c:,}' for c in args.clients)} clients (one server at a time, the order rotating per"
        f" count); per rate ({', '.join(f'{r:,}' for r in args.rates)} messages/s), one batch every"
        f" {args.commit_interval_ms} ms (rate x {args.commit_interval_ms / 1000:g} messages), {args.warmup:g} s"
        f" warm-up, {args.duration:g} s measured; ~{args.payload_bytes}-byte payloads. The lowest rate is one"
        " message per batch, so one message per frame; the highest is batched (each server frames as it does).",
        "- Clients: each speaks its server's protocol with the same policy: sparkwire hello/welcome/snapshot,"
        " entries, acks as the welcome asks, pongs; centrifuge connect + subscribe (`recover` with epoch and"
        " offset on a reconnect), pongs; naive: nothing. After a lost connection every client reconnects with"
        " full-jitter backoff from 0.5 s (docs/protocol.md) to the next address of its list.",
        "- Latency: the client's receive time minus the time carried in the message (sparkwire: `commitMs`, Redis"
        " `TIME` at the start of the commit script; centrifuge and naive: the publisher's clock just before it"
        " publishes); same host, same clock; 0.1 ms buckets, nearest rank. *Delivered per server CPU s* divides"
        " messages received by all clients by the server process's own CPU time (`/proc/<pid>/stat`).",
        "- Exactly once: every client checks every position (seq / offset / publisher sequence) for holes and"
        " repeats and must end at the last one published; a peer that loses or repeats is reported so.",
        "",
        "### Delivery",
        "",
        *delivery_table(phases),
        "",
        "### Memory per idle connection and connect time",
        "",
        "Server RSS after 20 warm-up connections came and went, and with all clients connected and idle;"
        " *connect all* = until every client was subscribed and positioned (64 handshakes in flight).",
        "",
        *memory_table(idles),
        "",
    ]
    if kills:
        lines += [
            f"### SIGKILL of the server with {args.kill_clients:,} clients",
            "",
            f"Two instances of each server on the same Redis; all clients on the first; publishing at"
            f" {args.kill_rate}/s throughout; SIGKILL of the first {args.kill_after:g} s in, publishing goes on"
            f" {args.kill_for:g} s; the clients reconnect to the second. *Caught up*: from the SIGKILL until the"
            " last client received a message published after it was back (resolution: one batch,"
            f" {args.commit_interval_ms} ms); *lost* / *duplicated*: positions a client never got / got twice.",
            "",
            *kill_table(kills),
            "",
        ]
    lines += [*aims(phases, idles), "", end]
    return "\n".join(lines) + "\n"
