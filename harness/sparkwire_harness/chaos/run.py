"""``sparkwire-harness chaos``: the whole pipeline — producer, Kafka, the Spark aggregator and the orders example's
job (``chaos/orders.py``), Redis, three gateways behind nginx, hundreds of Python clients and the dashboard
in Chromium — on this machine, under one seeded fault schedule (printed first; the same seed gives the same
schedule), then checked: every client's render against results computed independently from the produced
events (a filtered or scoped client's against those its view admits: ``views.py``), every orders revision
against the orders, and the processes' counters. Ends with one line,
``OK exactly once: ...`` or ``FAIL: <client>, seq <n>: ...``; exit 0 or 1.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.chaos import faults as fault_kinds
from sparkwire_harness.chaos import views
from sparkwire_harness.chaos.counters import cross_check
from sparkwire_harness.chaos.large_orders import FeedCheck, LargeOrdersSide, SupervisedLargeOrders
from sparkwire_harness.chaos.monitor import Monitor, client_id
from sparkwire_harness.chaos.orders import OrdersCheck, OrdersSide, SupervisedOrders
from sparkwire_harness.chaos.pipeline import (
    DELAY_MS,
    REPLICATED_DELAY_MS,
    WINDOW_MS,
    Settings,
    SupervisedAggregator,
    events_path,
    producer,
    wait_exit,
)
from sparkwire_harness.chaos.recovery import Recovery, own_fault_windows, recovery, summarize
from sparkwire_harness.chaos.schedule import CATEGORY, EDGES, Schedule, build_schedule
from sparkwire_harness.chaos.topology import STREAM, TOPOLOGIES, Topology, start_topology
from sparkwire_harness.chaos.verifier import Verdict, first_problem, verdict_line, verify
from sparkwire_harness.stack import ManagedProcess, cache_dir, exit_on_sigterm
from sparkwire_harness.verify import WindowResult, expected_results, oracle_input, read_produced

# Shorter than the defaults (20 s / 30 s), so a hung gateway is found within a short run; the client's
# silence timeout follows the protocol's rule, ping interval + 10 s.
GATEWAY_ARGS = ["--ping-interval-ms", "5000", "--pong-timeout-ms", "15000", "--log-level", "WARNING"]
SILENCE_S = 15.0
LEAD_S = 25.0  # from starting the clients to the fault window: Spark and 200 clients come up meanwhile
ClientPaths = dict[str, set[str]]
"""Client id -> the fault targets on its path (its edge link, its process)."""
Scrape = tuple[int | None, int]
"""A process's current pid (None while it is down) and its metrics port."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the fault window (events produced)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the fault schedule, the clients and the events")
    parser.add_argument("--clients", type=int, default=200, help="Python clients (plus one Chromium page)")
    parser.add_argument("--client-processes", type=int, default=4, help="processes the Python clients share")
    parser.add_argument("--no-browser", action="store_true", help="no Chromium page")
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs) even when the run passes")
    parser.add_argument("--topology", choices=TOPOLOGIES, default="replicated",
                        help="replicated: Redis with 2 replicas and 3 sentinels, 3 Kafka brokers (redis-failover and "
                             "kafka-leader faults); single: one of each (redis-kill and kafka-restart faults)")


def _say(text: str) -> None:
    print(f"[chaos] {text}", flush=True)


def _took(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:5.1f}s"


def _who(measured: Recovery) -> str:
    """The clients that came last, and those left out with the time counting them."""
    text = ""
    if measured.last:
        text += "; last: " + ", ".join(measured.last[:4]) + (" ..." if len(measured.last) > 4 else "")
    if measured.excused:
        text += (f"; every client {_took(measured.every_client).strip()} (left out, under a fault of their own: "
                 + ", ".join(measured.excused[:4]) + (" ..." if len(measured.excused) > 4 else "") + ")")
    return text


def _start_clients(topology: Topology, schedule: Schedule, secret: str, t0: float, processes: int,
                   browser: bool) -> tuple[list[ManagedProcess], ManagedProcess | None, list[Path], ClientPaths]:
    """The client processes, the page, their status files, and each client's path: client id -> the fault
    targets it goes through (its edge link; the slow clients' process, which consumer-freeze stops)."""
    workdir = topology.workdir
    ttl = int(schedule.window_s) + 3600
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    paths: ClientPaths = {}
    regular = [c for c in schedule.clients if c.kind != "slow"]
    for index, plan in enumerate(regular):
        name = f"clients-{index % max(1, processes)}"
        groups[name].append(_client_plan(topology, plan, secret, ttl))
        paths[client_id(name, plan.id)] = {plan.edge}
    slow = [p for p in schedule.clients if p.kind == "slow"]
    if slow:
        groups["clients-slow"] = [_client_plan(topology, p, secret, ttl) for p in slow]
        paths.update({client_id("clients-slow", p.id): {p.edge, "slow-clients"} for p in slow})
    workers, status_files = [], []
    for name, clients in groups.items():
        plan_path = workdir / f"{name}.plan.json"
        status, report = workdir / f"{name}.status.json", workdir / f"{name}.report.json"
        plan_path.write_text(json.dumps({"t0": t0, "silence_s": SILENCE_S, "status": str(status),
                                         "report": str(report), "clients": clients}))
        worker = ManagedProcess(name, [sys.executable, "-m", "sparkwire_harness.chaos.clients", str(plan_path)],
                                workdir)
        worker.start()
        workers.append(worker)
        status_files.append(status)
    page = None
    if browser:
        token = issue_token(secret, [STREAM], ttl, subject="page", now=int(time.time()))
        reloads = [f.at_s for f in schedule.faults if f.kind == "page-reload"]
        url = f"{topology.edge_url('edge-0')}/?stream={STREAM}&record=1&maxDelayMs=5000#token={token}"
        plan_path = workdir / "page.plan.json"
        plan_path.write_text(json.dumps({"t0": t0, "url": url, "reloads": reloads,
                                         "status": str(workdir / "page.status.json"),
                                         "report": str(workdir / "page.report.json")}))
        page = ManagedProcess("page", [sys.executable, "-m", "sparkwire_harness.chaos.browser", str(plan_path)],
                              workdir)
        page.start()
        status_files.append(workdir / "page.status.json")
        paths[client_id("page", "page")] = {"edge-0"}  # its reloads: away (seq -1) on its own
    return workers, page, status_files, paths


def _client_plan(topology: Topology, plan: Any, secret: str, ttl: int) -> dict[str, Any]:
    """What a client process runs for ``plan``: a filtered client's ``filter`` and its token's scope from its
    profile (``views.py``)."""
    profile = views.BY_NAME[plan.profile] if plan.profile else views.Profile("")
    return {"id": plan.id, "kind": plan.kind, "edge": plan.edge, "url": topology.edge_ws(plan.edge),
            "port": topology.proxy_port(plan.edge), "absences": [list(a) for a in plan.absences],
            "profile": plan.profile, "filter": profile.filter,
            "token": views.token(secret, STREAM, profile, ttl, subject=f"client-{plan.id}")}


def _wait(condition: Any, timeout: float, what: str) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            _say(f"gave up waiting for {what} after {timeout:.0f}s")
            return False
        time.sleep(1.0)
    return True


def _collect(process: ManagedProcess, report: Path) -> Any:
    process.stop(timeout=60)  # SIGTERM: the process stops its clients and writes its report
    try:
        return json.loads(report.read_text())
    except (OSError, ValueError) as error:
        raise RuntimeError(f"{process.name} wrote no report ({error}); log:\n{process.log_tail(30)}") from error


def run(args: argparse.Namespace) -> int:
    exit_on_sigterm()  # a SIGTERM (timeout, kill) stops the whole pipeline as Ctrl-C does
    schedule = build_schedule(args.seed, args.minutes, args.clients, args.topology)
    print(schedule.describe(), flush=True)
    workdir = cache_dir() / "run" / f"chaos-{time.strftime('%Y%m%d-%H%M%S')}-seed{args.seed}"
    workdir.mkdir(parents=True)
    _say(f"work dir {workdir}")
    secret = secrets.token_urlsafe(48)
    topology = start_topology(workdir, secret, GATEWAY_ARGS, args.topology)
    settings = Settings(rate=args.rate, delay_ms=REPLICATED_DELAY_MS if topology.replicated else DELAY_MS)
    aggregator = SupervisedAggregator(topology, settings)
    orders = OrdersSide(topology, SupervisedOrders(topology, settings))
    large_orders = LargeOrdersSide(topology, SupervisedLargeOrders(topology, settings))
    clients: list[ManagedProcess] = []  # the client processes and the page, killed whatever happens
    ok = False
    try:
        aggregator.start()
        orders.driver.start()
        large_orders.start_driver()
        t0 = time.time() + LEAD_S
        workers, page, status_files, paths = _start_clients(topology, schedule, secret, t0, args.client_processes,
                                                            not args.no_browser)
        clients += [*workers, *([page] if page else [])]
        edges = [f"edge-{i}" for i in range(EDGES)]
        orders.start_clients(secret, int(schedule.window_s) + 3600, edges)
        _say(large_orders.start_clients(secret, int(schedule.window_s) + 3600, t0, schedule.window_s, args.seed,
                                        SILENCE_S, edges))
        slow = next((w for w in workers if w.name == "clients-slow"), None)
        targets = fault_kinds.Targets(topology, aggregator, slow, other_drivers=[orders.driver, large_orders.driver])
        monitor = Monitor(topology.redis_client(), STREAM, status_files, _scrape_targets(topology, aggregator))
        expected_clients = args.clients + (page is not None)
        _wait(lambda: len(monitor.client_seqs()) >= expected_clients, LEAD_S + 60, "every client to start")
        applied = _fault_window(topology, settings, schedule, args.seed, orders, monitor, targets, t0,
                                expected_clients)
        expected = _expected_windows(workdir, settings)
        _await_delivery(monitor, len(expected))
        _write_progress(workdir, monitor, t0)
        try:
            rendered = [c for w in workers for c in _collect(w, workdir / f"{w.name}.report.json")["clients"]]
            page_report = _collect(page, workdir / "page.report.json") if page is not None else None
        except RuntimeError as error:  # a client process died: what it rendered is unknown
            print(f"FAIL: {error}", flush=True)
            return 1
        verdict, counter_lines = _check_log(topology, schedule, monitor, expected, rendered, page_report)
        side_checks: list[OrdersCheck | FeedCheck] = [orders.check(), large_orders.check(Path(orders.orders_file))]
        ok = _report(verdict, counter_lines, side_checks, schedule, aggregator, monitor, applied, paths, t0)
        return 0 if ok else 1
    finally:
        for process in clients:
            process.kill()
        aggregator.stop()
        orders.stop()
        large_orders.stop()
        topology.stop()
        if ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            _say(f"logs kept in {workdir}")


def _scrape_targets(topology: Topology, aggregator: SupervisedAggregator) -> Callable[[], dict[str, Scrape]]:
    """Where the monitor reads the processes' metrics now (a restarted process has a new pid)."""
    def scrape_targets() -> dict[str, Scrape]:
        found: dict[str, Scrape] = {f"gateway-{i}": (g.process.pid, g.port) for i, g in enumerate(topology.gateways)}
        found["aggregator"] = (aggregator.process.pid if aggregator.process else None, aggregator.metrics_port)
        return found

    return scrape_targets


def _fault_window(topology: Topology, settings: Settings, schedule: Schedule, seed: int, orders: OrdersSide,
                  monitor: Monitor, targets: fault_kinds.Targets, t0: float,
                  expected_clients: int) -> list[fault_kinds.Applied]:
    """From ``t0``: the producers run for the window while every fault is injected at its time, each on a
    thread of its own; returns once the producer is done and the faults have ended."""
    time.sleep(max(0.0, t0 - time.time()))
    produce = producer(topology, settings, schedule.window_s, seed)
    produce.start()
    orders.start_producer(schedule.window_s, seed)
    monitor.start()
    _say(f"fault window of {schedule.window_s:.0f}s begins; {expected_clients} clients")
    stop = threading.Event()
    applied: list[fault_kinds.Applied] = []

    def one(fault: Any) -> None:
        result = fault_kinds.apply(fault, targets, t0, stop)
        applied.append(result)
        failure = f" FAILED: {result.error}" if result.error else ""
        _say(f"injected at +{result.injected_at - t0:6.1f}s: {fault.describe()}{failure}")

    threads = [threading.Thread(target=one, args=(f,), daemon=True) for f in schedule.faults]
    for thread in threads:
        thread.start()
    code = wait_exit(produce, schedule.window_s + 120)
    for thread in threads:
        thread.join(timeout=120)
    if code != 0:
        raise RuntimeError(f"the producer failed ({code}):\n{produce.log_tail(20)}")
    return applied


def _expected_windows(workdir: Path, settings: Settings) -> dict[str, WindowResult]:
    """The results computed independently from the events the producer wrote down."""
    raw = read_produced(events_path(workdir))
    expected = expected_results(oracle_input(raw), WINDOW_MS, settings.delay_ms)
    _say(f"producer done: {len(raw)} records, {len(expected)} windows expected; waiting for the log, the clients")
    return expected


def _await_delivery(monitor: Monitor, windows: int) -> None:
    """Until the log holds every window and every client the log's head (or the time is up), then the monitor
    stops."""
    _wait(lambda: monitor.head() >= windows, 240, f"the log to reach seq {windows}")
    head = max(monitor.head(), 0)
    _wait(lambda: min(monitor.client_seqs().values(), default=0) >= head, 180, f"every client to reach seq {head}")
    time.sleep(2.0)  # the last acks reach the session hashes
    monitor.stop()


def _write_progress(workdir: Path, monitor: Monitor, t0: float) -> None:
    """Who was where when: the log's head and each client's seq, once a second (t from the run's t0)."""
    with (workdir / "progress.jsonl").open("w") as progress:
        for sample in monitor.samples:
            row = {"t": round(sample.t - t0, 2), "head": sample.head, "seqs": sample.seqs}
            progress.write(json.dumps(row) + "\n")


def _check_log(topology: Topology, schedule: Schedule, monitor: Monitor, expected: dict[str, WindowResult],
               rendered: list[Any], page_report: Any) -> tuple[Verdict, list[str]]:
    """The log, every client's render and the processes' counters against the independently computed results;
    the verdict and what the counters say."""
    reader = ReplayLogReader(topology.redis_client(), STREAM)
    entries, meta = list(reader.iter_all()), reader.meta()
    driver_kills = sum(1 for f in schedule.faults if f.kind == "driver-kill")
    counters = cross_check(monitor, meta, len(expected), topology.redis_client(), driver_kills)
    return verify(expected, entries, rendered, page_report, counters.problems), counters.lines


def _report(verdict: Verdict, counter_lines: list[str], side_checks: list[OrdersCheck | FeedCheck], schedule: Schedule,
            aggregator: SupervisedAggregator, monitor: Monitor, applied: list[fault_kinds.Applied], paths: ClientPaths,
            t0: float) -> bool:
    """Print how long each fault took to recover from, what the counters say, the problems and the one verdict
    line; whether the run passed."""
    times, every = _recoveries(monitor, applied, paths)
    for line in counter_lines:
        _say(line)
    failed = [a for a in applied if a.error]
    for result in failed:
        _say(f"fault #{result.fault.index} could not be applied: {result.error}")
    _say(f"aggregator exits: {len(aggregator.exits)} ({sorted(set(aggregator.exits))}); clients resent after a "
         f"session-only resume: {verdict.resent_after_session_resume}")
    _say("recovery (until every client not under a fault of its own path holds the first result committed "
         "after the fault ended):")
    for line in summarize(times):
        print(line, flush=True)
    _say("recovery, every client (those under a fault of their own too):")
    for line in summarize(every):
        print(line, flush=True)
    for problem in verdict.problems[:10]:
        _say(f"problem: {problem.who} seq {problem.seq}: {problem.what}")
    for filtered in verdict.filtered_lines:  # each filtered or scoped client against its own oracle
        _say(filtered)
    for side in side_checks:  # the other jobs' streams: the orders example, the real-time large-orders feed
        for line in side.lines:
            _say(line)
    line = verdict_line(verdict, schedule.counts(), _fault_before(verdict, applied, t0))
    failing = next((side for side in side_checks if not side.ok), None)
    if verdict.ok and failing is not None:
        line = f"FAIL: {failing.lines[-1]}"
    print(line, flush=True)
    return verdict.ok and not failed and failing is None


Recoveries = dict[str, list[float | None]]
"""Fault category -> the seconds until recovery from each fault of it (None: never)."""


def _recoveries(monitor: Monitor, applied: list[fault_kinds.Applied],
                paths: ClientPaths) -> tuple[Recoveries, Recoveries]:
    """Each fault's recovery, printed as it is measured: until every client not under another fault of its own
    path has caught up, and until every client has."""
    times: Recoveries = defaultdict(list)
    every: Recoveries = defaultdict(list)
    for result in sorted(applied, key=lambda a: a.fault.index):
        # every other fault that stops or throttles delivery (added latency does not: a client behind it
        # still counts); a fault's own clients are not excused from its own recovery
        others = [(a.fault.target, a.injected_at, a.ended_at) for a in applied
                  if a is not result and not a.error and a.fault.toxic != "latency"]
        own = own_fault_windows(paths, others)
        measured = recovery(monitor.samples, result.ended_at, own)
        times[CATEGORY[result.fault.kind]].append(measured.seconds)
        every[CATEGORY[result.fault.kind]].append(measured.every_client)
        _say(f"recovered {_took(measured.seconds)} after {result.fault.describe()}" + _who(measured))
    return times, every


def _fault_before(verdict: Verdict, applied: list[fault_kinds.Applied], t0: float) -> str | None:
    """The last fault injected before the first problem's result was committed: where to look first."""
    first = first_problem(verdict)
    if first is None or not first.commit_ms:
        return None
    earlier = [a for a in applied if a.injected_at <= first.commit_ms / 1000]
    if not earlier:
        return None
    last = max(earlier, key=lambda a: a.injected_at)
    return f"{last.fault.describe()} (injected at +{last.injected_at - t0:.1f}s)"
