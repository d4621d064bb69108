"""The processes' own counters at the end of a run, cross-checked: what gateways, clients and the sink
say happened must agree with what the verifier saw.

* gateways: no gap seen by any gateway, and no duplicate or gap reported by any client in its acks —
  summed over every incarnation (the last scrape of a killed one);
* sessions (Redis): the cumulative duplicates and gaps every client wrote in its acks are 0;
* the sink (the stream's meta hash, which outlives driver kills): every result appended once —
  ``records_committed`` = the last seq = the number of expected results — so whatever the killed
  drivers sent again was refused as a replayed chunk or a suppressed duplicate, never appended; and no
  tail lost (``tail_losses``: a failover promoted a replica without the last batches; with the writer's
  WAIT none should be). Publishes replayed after a failover (the same staged bytes again) are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis as redis_lib

from sparkwire.replaylog import StreamMeta
from sparkwire_harness.chaos.monitor import Monitor

# docs/protocol.md: a session's hash, hash-tagged by session id.
SESSION_PATTERN = "sparkwire:session:*"


@dataclass
class CounterCheck:
    problems: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def session_totals(client: redis_lib.Redis) -> tuple[int, int, int]:
    """(sessions, duplicates, gaps) over every session hash in Redis."""
    sessions = duplicates = gaps = 0
    for key in client.scan_iter(match=SESSION_PATTERN, count=500):
        raw = client.hmget(key, ["duplicates", "gaps"])
        sessions += 1
        duplicates += int(raw[0] or 0)
        gaps += int(raw[1] or 0)
    return sessions, duplicates, gaps


def cross_check(monitor: Monitor, meta: StreamMeta, expected: int, redis: redis_lib.Redis,
                driver_kills: int) -> CounterCheck:
    check = CounterCheck()
    gw = {name: int(monitor.total("gateway", f"sparkwire_{name}_total")) for name in (
        "gateway_gaps_detected", "client_reported_duplicates", "client_reported_gaps",
        "gateway_duplicates_suppressed", "gateway_entries_replayed", "gateway_slow_consumer_closes")}
    incarnations = sum(1 for name, _ in monitor.scrapes if name.startswith("gateway"))
    check.lines.append(
        f"gateways ({incarnations} incarnations scraped): gaps seen 0={gw['gateway_gaps_detected']}, client-reported "
        f"duplicates {gw['client_reported_duplicates']} and gaps {gw['client_reported_gaps']}; replay/live overlaps "
        f"suppressed {gw['gateway_duplicates_suppressed']}, entries replayed {gw['gateway_entries_replayed']}, "
        f"slow-consumer closes {gw['gateway_slow_consumer_closes']}")
    for name in ("gateway_gaps_detected", "client_reported_duplicates", "client_reported_gaps"):
        if gw[name]:
            check.problems.append(f"sparkwire_{name}_total = {gw[name]} (expected 0)")
    sessions, duplicates, gaps = session_totals(redis)
    check.lines.append(f"sessions in Redis: {sessions}, acked duplicates {duplicates}, acked gaps {gaps}")
    if duplicates or gaps:
        check.problems.append(f"client sessions report {duplicates} duplicates and {gaps} gaps")
    counters = meta.counters
    committed = counters.get("records_committed", 0)
    sink_scraped = int(monitor.total("aggregator", "sparkwire_sink_records_committed_total"))
    check.lines.append(
        f"sink: {committed} results appended (log last seq {meta.last_seq}, expected {expected}); after "
        f"{driver_kills} driver kills {counters.get('chunks_replayed', 0)} chunks replayed and "
        f"{counters.get('duplicates_suppressed', 0)} duplicates suppressed (never appended), "
        f"{counters.get('batches_abandoned', 0)} staged batches abandoned, {counters.get('batches_committed', 0)} "
        f"batches, {counters.get('publishes_replayed', 0)} publishes replayed, {counters.get('tail_losses', 0)} "
        f"tails lost; the drivers' own last scrapes count {sink_scraped} appended")
    if counters.get("tail_losses", 0):
        check.problems.append(f"{counters['tail_losses']} tails lost in a failover (detected; the log was rebuilt)")
    if not committed == meta.last_seq == expected:
        check.problems.append(f"sink appended {committed}, log ends at {meta.last_seq}, {expected} expected")
    if sink_scraped > committed:
        check.problems.append(f"the drivers report {sink_scraped} appended, the log's meta {committed}")
    return check
