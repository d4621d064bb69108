"""The side-by-side section of docs/benchmarks.md: every figure of every server, the median of its repeats,
with its ratio to the centrifuge peer (median and spread over the repeats), and its aims marked met or not
met in every repeat from the numbers themselves (bench/_sbs_aims.py)."""

from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from _common import closes_text, markers
from _sbs_aims import PEER, aims_lines
from _sbs_measure import Idle, Kill, Outcome, Phase
from _sbs_repeats import R, by_repeat, group, median, once_text, paired_ratios, ratio_summary

SECTION = "side_by_side"
NAMES = {"sparkwire": "sparkwire gateway", "centrifuge": "centrifuge peer", "naive": "naive pub/sub"}
T = TypeVar("T")


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


def _med(rows: Sequence[T], value: Callable[[T], float], digits: int = 0) -> str:
    return _num(median(value(r) for r in rows), digits)


def _vs_peer(rows: Sequence[R], peer: Sequence[R], value: Callable[[R], float]) -> str:
    """`` (0.96x, 0.91-1.02x)``: the median of the repeats' ratios to the peer's row and their spread."""
    text = ratio_summary(paired_ratios(by_repeat(rows, value), by_repeat(peer, value)))
    return f" ({text})" if text else ""


def _failure(s: Outcome) -> str | None:
    """None when exactly once, else what went wrong in that repeat."""
    if s.exactly_once:
        return None
    parts = [f"{n:,} {what}" for n, what in ((s.lost, "lost"), (s.duplicates, "duplicated"),
                                             (s.resets, "resets"), (s.behind, "behind")) if n]
    return f"{s.complete:,}/{s.clients:,} complete, " + ", ".join(parts or ["incomplete"])


def _once(rows: Sequence[Phase] | Sequence[Kill]) -> str:
    return once_text([(r.repeat, _failure(r.seen)) for r in rows])


def _order(server: str) -> tuple[bool, str]:
    return server != "sparkwire", server


def delivery_table(phases: Sequence[Phase]) -> list[str]:
    lines = ["| clients | rate msg/s | server | repeats | delivered/s | msgs/frame | server CPU s (kernel)"
             " | delivered per server CPU s (x peer) | p50 / p99 / p999 ms (p99 x peer) | Redis CPU s"
             " | load-gen CPU s | exactly once |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    rows = group(phases, lambda p: (p.clients, p.rate, p.server))
    for (clients, rate, server), ps in sorted(rows.items(), key=lambda kv: (*kv[0][:2], *_order(kv[0][2]))):
        peer = rows.get((clients, rate, PEER), [])
        lines.append(
            f"| {clients:,} | {rate:,} | {NAMES[server]} | {len(ps)} | {_med(ps, lambda p: p.delivered_per_s)}"
            f" | {_med(ps, lambda p: p.per_frame, 1)} | {_med(ps, lambda p: p.server_cpu, 2)}"
            f" ({_med(ps, lambda p: p.server_kernel_cpu, 2)})"
            f" | {_med(ps, lambda p: p.per_cpu)}{_vs_peer(ps, peer, lambda p: p.per_cpu)}"
            f" | {_med(ps, lambda p: p.seen.latency_ms(0.5), 1)} / {_med(ps, lambda p: p.seen.latency_ms(0.99), 1)}"
            f" / {_med(ps, lambda p: p.seen.latency_ms(0.999), 1)}"
            f"{_vs_peer(ps, peer, lambda p: p.seen.latency_ms(0.99))}"
            f" | {_med(ps, lambda p: p.redis_cpu, 2)} | {_med(ps, lambda p: p.seen.loadgen_cpu, 2)} | {_once(ps)} |")
    return lines


def memory_table(idles: Sequence[Idle]) -> list[str]:
    lines = ["| clients | server | repeats | connected | RSS before MiB | RSS idle MiB | KB per idle connection"
             " (x peer) | connect all s (x peer) | per client p50 / p99 ms |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = group(idles, lambda m: (m.clients, m.server))
    for (clients, server), ms in sorted(rows.items(), key=lambda kv: (kv[0][0], *_order(kv[0][1]))):
        peer = rows.get((clients, PEER), [])
        failed = sum(m.failed for m in ms)
        lines.append(
            f"| {clients:,} | {NAMES[server]} | {len(ms)} | {_med(ms, lambda m: m.connected)}"
            + (f" ({failed:,} failed in all)" if failed else "")
            + f" | {_med(ms, lambda m: m.before['VmRSS'] / 1024, 1)} | {_med(ms, lambda m: m.after['VmRSS'] / 1024, 1)}"
            f" | {_med(ms, lambda m: m.kb_per_connection, 1)}{_vs_peer(ms, peer, lambda m: m.kb_per_connection)}"
            f" | {_med(ms, lambda m: m.connect_seconds, 2)}{_vs_peer(ms, peer, lambda m: m.connect_seconds)}"
            f" | {_med(ms, lambda m: m.connect_p50 * 1000, 1)} / {_med(ms, lambda m: m.connect_p99 * 1000, 1)} |")
    return lines


def kill_table(kills: Sequence[Kill]) -> list[str]:
    lines = ["| server | clients | msg/s | repeats | every client back after s (x peer)"
             " | every client caught up after s (x peer) | clients back / not caught up | lost | duplicated"
             " | resets | reconnects | server closes seen"
             " | exactly once |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    rows = group(kills, lambda k: (k.server, k.clients, k.rate))
    for (server, clients, rate), ks in sorted(rows.items(), key=lambda kv: (*_order(kv[0][0]), *kv[0][1:])):
        peer = rows.get((PEER, clients, rate), [])
        closes: Counter[int] = Counter()
        for k in ks:
            closes.update(k.seen.close_codes)
        lines.append(
            f"| {NAMES[server]} | {clients:,} | {rate:,} | {len(ks)} | {_med(ks, lambda k: k.back_s, 3)}"
            f"{_vs_peer(ks, peer, lambda k: k.back_s)} | {_med(ks, lambda k: k.caught_up_s, 2)}"
            f"{_vs_peer(ks, peer, lambda k: k.caught_up_s)}"
            f" | {_med(ks, lambda k: k.recovered_clients)} / {_med(ks, lambda k: k.not_caught_up)}"
            f" | {sum(k.seen.lost for k in ks):,} | {sum(k.seen.duplicates for k in ks):,}"
            f" | {sum(k.seen.resets for k in ks):,} | {_med(ks, lambda k: k.seen.reconnects)}"
            f" | {closes_text(closes)} | {_once(ks)} |")
    return lines


def render(ctx: Context, idles: Sequence[Idle], phases: Sequence[Phase], kills: Sequence[Kill]) -> str:
    args, info = ctx.args, ctx.info
    n = len({r.repeat for r in idles} | {r.repeat for r in phases} | {r.repeat for r in kills})
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
        "  (`services/sparkwire/gateway/transport/wire.py`).",
        "- **centrifuge peer** (`bench/peers/centrifuge`): `github.com/centrifugal/centrifuge` v0.40.1, the",
        "  engine of Centrifugo, with its Redis broker, history (1,000,000 publications, 1 h) and a positioned,",
        "  recoverable channel (what Centrifugo runs with `force_recovery` + `force_positioning`); JSON protocol;",
        "  fed by the same binary's `publish` (a separate process, publications of a batch sent concurrently so",
        "  they are pipelined). Centrifugo itself is not served by the Go module proxy here; its engine is.",
        "- **naive pub/sub** (`bench/peers/naive_pubsub.py`): Starlette on uvicorn broadcasting one Redis pub/sub",
        "  channel, one `PUBLISH` per batch; no history, no resume: the floor that shows what exactly-once costs.",
        "",
        f"Run {ctx.date}, {ctx.wall / 60:.1f} min wall time for {n} repeat{'s' if n != 1 else ''} of every"
        " measurement. Reproduce with (`make bench-peers`):",
        "",
        "```sh",
        f"flock /tmp/sparkwire-heavy.lock {ctx.command}",
        "```",
        "",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, {info['os']}; Redis {info['redis']}"
        f" (AOF, `appendfsync always`, no automatic AOF rewrite, one instance for all servers),"
        f" Python {info['python']}.",
        "- Pinning: each server runs with `taskset -c 0`, the load generator with `taskset -c 1`; `redis-server`"
        " and the publishers are not pinned (they share both CPUs). The machine is shared with other work:"
        f" load average {ctx.load_before[0]:.2f} / {ctx.load_before[1]:.2f} / {ctx.load_before[2]:.2f} before,"
        f" {ctx.load_after[0]:.2f} after; the whole run held `/tmp/sparkwire-heavy.lock`.",
        f"- Repeats: the run is {n} pass{'es' if n != 1 else ''}, each measuring every row below (every client"
        " count, then the SIGKILL test) on every server. The servers' order rotates by one per client count and"
        " per pass (pass r starts each count with a different server than pass r - 1), so no server always runs"
        " first or last. A row shows the **median** of its repeats (each quantile is the median of the repeats'"
        " quantiles); *x peer* is each repeat's figure over the centrifuge peer's in the same pass: the median of"
        " those ratios, then their spread (min-max over the repeats) when they differ. Exactly once says *yes*"
        " only when every repeat was; an aim is met only when every repeat meets it.",
        f"- Load: {', '.join(f'{c:,}' for c in args.clients)} clients (one server at a time); per rate"
        f" ({', '.join(f'{r:,}' for r in args.rates)} messages/s), one batch every"
        f" {args.commit_interval_ms} ms (rate x {args.commit_interval_ms / 1000:g} messages), {args.warmup:g} s"
        f" warm-up, {args.duration:g} s measured ({args.one_per_frame_duration:g} s at one message per batch: such"
        " a phase costs a server under 1 CPU s per 5 s at 1,000 clients, and a reading that short moved about a"
        f" tenth between passes); ~{args.payload_bytes}-byte payloads. The lowest rate is one"
        " message per batch, so one message per frame; the highest is batched (each server frames as it does).",
        "- Clients: each speaks its server's protocol with the same policy: sparkwire hello/welcome/snapshot,"
        " entries, acks as the welcome asks, pongs; centrifuge connect + subscribe (`recover` with epoch and"
        " offset on a reconnect), pongs; naive: nothing. After a lost connection every client reconnects with"
        " full-jitter backoff from 0.5 s (docs/protocol.md) to the next address of its list.",
        "- Latency: the client's receive time minus the time carried in the message (sparkwire: `commitMs`, Redis"
        " `TIME` at the start of the commit script; centrifuge and naive: the publisher's clock just before it"
        " publishes); same host, same clock; 0.1 ms buckets, nearest rank. *Delivered per server CPU s* divides"
        " messages received by all clients by the server process's own CPU time (`/proc/<pid>/stat`), in"
        " brackets the kernel's part of it (the process's system time: its sockets' work; on loopback, the"
        " receiving socket's side of a send is mostly done in the sender's system call too).",
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
            f" {args.kill_rate}/s throughout, every server's publisher on the same wall-clock schedule; SIGKILL of"
            f" the first {args.kill_after:g} s in, half-way between two batches; publishing goes on"
            f" {args.kill_for:g} s; the clients reconnect to the second (full-jitter backoff from 0.5 s). *Back*:"
            " from the SIGKILL until the last client was positioned again (sparkwire welcome, centrifuge subscribe"
            " reply with its recovery); *caught up*: until the last client received a message published after it"
            f" was back (resolution: one batch, {args.commit_interval_ms} ms); *lost* / *duplicated*: positions a"
            " client never got / got twice;"
            " lost, duplicated, resets and server closes are summed over the repeats, the rest are medians.",
            "",
            *kill_table(kills),
            "",
        ]
    lines += [*aims_lines(phases, idles, kills), "", end]
    return "\n".join(lines) + "\n"
