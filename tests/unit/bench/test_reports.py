"""The sections the benchmark scripts write into docs/benchmarks.md, rendered from small made-up
measurements: each is documentation (its markers, the method, the machine, the figures and the aims stated as
aims), not history: no commit hash, no issue number, and no CLI spelling that is gone (``--x true``)."""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import _fanout_report
import _sbs_report
import _spark_report
import driver_recovery
import gateway_fanout
import side_by_side
import spark_throughput
import update_latency
from _common import markers
from _fanout_measure import Memory
from _fanout_measure import Phase as FanoutPhase
from _recovery_phases import Recovery
from _sbs_measure import Idle, Kill, Outcome
from _sbs_measure import Phase as SbsPhase
from _spark_rates import Batch, RateVerdict, Rendered, RunSpec
from _update_latency import Received, Shown

INFO = {"nproc": "2", "cpu": "AMD EPYC", "ram": "23.5 GiB", "redis": "7.0.15", "redis_py": "8.1.0",
        "python": "3.11.7", "os": "Linux-6.18-x86_64"}
DATE = "2026-11-28 10:00 UTC"
LOAD = (0.5, 1.0, 1.5)


def assert_documentation(text: str, section: str) -> None:
    start, end = markers(section)
    assert text.startswith(start + "\n") and text.rstrip("\n").endswith(end), "the section carries its markers"
    assert not re.search(r"\bcode:? +[0-9a-f]{7}|\bCode:|unknown \+ uncommitted|uncommitted changes", text), text
    assert not re.search(r"\bissues? +\d", text, re.IGNORECASE), re.search(r".*\bissues? +\d.*", text, re.I)
    assert not re.search(r"--[a-z][a-z-]* (true|false)\b", text), "CLI booleans take no value"
    assert "Machine: 2 CPUs (AMD EPYC)" in text
    assert "nan" not in text.replace("nanos", ""), "every figure made from the made-up data is a number"


def test_the_gateway_fanout_section(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SPARKWIRE_ACK_EVERY", "SPARKWIRE_SEND_QUEUE", "SPARKWIRE_RING_SIZE", "SPARKWIRE_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    args = gateway_fanout.parse_args(["--gateway-arg=--send-queue=512"])
    phases = [FanoutPhase(clients=1000, deflate=deflate, variant="", rate=10, per_commit=1, commits=50, committed=50,
                          commit_seconds=5.0, wall=5.0, gateway_cpu=0.7, redis_cpu=0.05, loadgen_cpu=0.6,
                          received=50_000, expected=50_000, complete=1000, frames=50_000, acks=5_000,
                          hist={88: 30_000, 190: 20_000}) for deflate in (False, True)]
    memories = [Memory(clients=1000, deflate=deflate, variant="", connected=1000, connect_seconds=0.8,
                       before={"VmRSS": 50_000, "Pss": 50_000}, after={"VmRSS": 69_000, "Pss": 69_000},
                       deflate_negotiated=1000 if deflate else 0) for deflate in (False, True)]
    text = _fanout_report.render(args, ".venv/bin/python bench/gateway_fanout.py", INFO, memories, phases,
                                 '{"n": 7950, "pad": "xxxx"}', 184, LOAD, LOAD, 57.0, DATE)
    assert_documentation(text, "gateway_fanout")
    # The options line is the gateway's own parser's reading of the run's options, not a copy of old defaults.
    assert ("- Gateway options: `--send-queue=512`, the rest the gateway's defaults (send queue 512 batches;"
            " clients ack every 1,000 entries or 1,000 ms" in text)
    assert "compression on and negotiated (`--per-message-deflate`)" in text
    assert "### Against the aims\n" in text


def outcome(clients: int, per_client: int) -> Outcome:
    return Outcome(clients=clients, received=clients * per_client, expected=clients * per_client, complete=clients,
                   frames=clients * per_client, hist=[(8.4, 500), (22.8, 500)], reconnects=clients,
                   close_codes={1006: clients})


def test_the_side_by_side_section() -> None:
    args = side_by_side.parse_args(["--clients", "1000", "--rates", "10"])
    servers = ("sparkwire", "centrifuge", "naive")
    phases = [SbsPhase(server=s, clients=1000, rate=10, per_commit=1, published=50, publish_seconds=5.0, wall=5.0,
                       server_cpu=0.8, redis_cpu=0.06, seen=outcome(1000, 50), repeat=r)
              for s in servers for r in (1, 2)]
    idles = [Idle(server=s, clients=1000, connected=1000, failed=0, connect_seconds=0.4, connect_p50=0.025,
                  connect_p99=0.056, before={"VmRSS": 50_000}, after={"VmRSS": 62_000}, repeat=r)
             for s in servers for r in (1, 2)]
    kills = [Kill(server=s, clients=1000, rate=100, published=1000, caught_up_s=0.6, back_s=0.5, recovered_clients=1000,
                  not_caught_up=0, seen=outcome(1000, 10), repeat=r) for s in servers for r in (1, 2)]
    context = _sbs_report.Context(args=args, command=".venv/bin/python bench/side_by_side.py", info=INFO, date=DATE,
                                  wall=600.0, load_before=LOAD, load_after=LOAD)
    text = _sbs_report.render(context, idles, phases, kills)
    assert_documentation(text, "side_by_side")
    assert "Run 2026-11-28 10:00 UTC, 10.0 min wall time for 2 repeats of every measurement. Reproduce with" in text
    assert "- Repeats: the run is 2 passes," in text
    assert "`--insecure-no-auth`" in text
    assert "| 1,000 | 10 | sparkwire gateway | 2 |" in text and "| yes, 2 of 2 |" in text
    assert "### Against the aims\n" in text
    assert "- p99 ≤ 20 ms at 1,000 clients on one pod: **not met** in 2 of 2 repeats (met in 0)" in text


def test_the_spark_throughput_section() -> None:
    args = spark_throughput.parse_args([])
    spec = RunSpec.parse("10000@1000")
    measured = [Batch(i, 10_000, 400, {"triggerExecution": 400, "addBatch": 300}, 280.0, 281.0) for i in range(6)]
    verdict = RateVerdict(rate=10_000, measured=measured, trigger_ms=1000, per_batch=10_000, label=spec.label)
    rendered = [Rendered(window_end_ms=10_000, commit_ms=15_300, received_ms=15_302),
                Rendered(window_end_ms=20_000, commit_ms=25_400, received_ms=25_403)]
    text = _spark_report.render(args=args, date=DATE, wall=382.0, info=INFO,
                                command=".venv/bin/python bench/spark_throughput.py", load=(LOAD, LOAD),
                                count=6_000_000, produce_s=52.0, verdicts=[verdict], best=verdict,
                                check=(spec, True, "400 entries", 59.0), rendered=rendered, producer_cpu=5.5)
    assert_documentation(text, "spark_throughput")
    assert "### Against the aims\n" in text and "**not met**; highest sustained rate 10,000 events/s" in text


def test_the_driver_recovery_section() -> None:
    args = driver_recovery.parse_args(["--kills", "2"])
    recoveries = [Recovery(killed=100.0 * k, restarted=100.0 * k, session=100.0 * k + 2.2, session_ms=1_900.0,
                           query_started=100.0 * k + 3.0, first_commit=100.0 * k + 5.8, first_batch_ms=2_700.0,
                           first_batch_phases={"addBatch": 1_944.0, "triggerExecution": 2_700.0},
                           first_result=100.0 * k + 6.3) for k in range(2)]
    text = driver_recovery.render(args, date=DATE, wall=361.0, info=INFO,
                                  command=".venv/bin/python bench/driver_recovery.py --kills 2",
                                  recoveries=recoveries, steady=[6.3, 6.2], check=(True, "136 entries"))
    assert_documentation(text, "driver_recovery")
    assert "flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/driver_recovery.py --kills 2" in text
    assert "| **kill → first batch committed** (live again) | **5.8 / 5.8** |" in text


def test_the_update_latency_section() -> None:
    args = update_latency.parse_args([])
    shown = [Shown(ts_ms=1_000 * n, first=Received(n, "w", "eu", n, 1_000 * n + 800, 1_000 * n + 803))
             for n in range(1, 5)]
    on_page = [Shown(s.ts_ms, Received(s.first.seq, "w", "eu", s.first.orders, s.first.commit_ms,
                                       s.first.commit_ms + 8)) for s in shown if s.first is not None]
    measured = update_latency.Measured(shown=shown, on_page=on_page, batch_ms=[340, 835], revisions=364, info=INFO)
    text = update_latency.render(args=args, date=DATE, wall=61.0, measured=measured,
                                 command=".venv/bin/python bench/update_latency.py")
    assert_documentation(text, "update_latency")
    assert "- A running value on the page ≤ 1,500 ms p50 after its event: **met**, 808 ms p50 on the page." in text


def test_no_bench_script_passes_a_cli_flag_that_is_gone() -> None:
    """What bench/ gives `sparkwire gateway` and the other commands, read by their own parsers."""
    from sparkwire.cli import build_parser

    gateway = ["gateway", "--port", "1", "--redis-url", "redis://127.0.0.1:1/0", "--streams", "bench"]
    aggregate = ["aggregate", "--bootstrap-servers", "b:1", "--topic", "t", "--dead-letter-topic", "",
                 "--redis-url", "redis://127.0.0.1:1/0", "--stream", "s", "--checkpoint", "/tmp/c"]
    produce = ["produce", "--bootstrap-servers", "b:1", "--topic", "t", "--count", "10", "--rate", "5",
               "--events-file", "/tmp/e", "--log-level", "WARNING"]
    commands = [
        [*gateway, "--pod-name", "gw-1", "--drain-ms", "1000", "--insecure-no-auth"],  # _servers.make_server
        [*gateway, "--per-message-deflate", "--insecure-no-auth"],  # the fan-out's deflate run
        *([*aggregate, "--driver-memory", "4g", *RunSpec.parse(spec).options]
          for spec in spark_throughput.DEFAULT_RUNS.split(",")),
        [*produce, "--realtime", "--heartbeat-ms", "1000", "--idle-ms", "20000"],
        [*produce, "--metrics", "50", "--start-ms", "1700000000000"],
    ]
    parser = build_parser()
    for command in commands:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a deprecated alias warns: that is a spelling that is gone, too
            assert isinstance(parser.parse_args(command), argparse.Namespace), command
