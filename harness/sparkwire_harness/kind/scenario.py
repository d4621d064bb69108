"""One run of the real pipeline on the cluster: clients connect through the ingress, a producer Job runs
with faults in the background, then every expected result is committed and every client has caught up;
afterwards the exactly-once checks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sparkwire_harness.e2e.fault_loop import FaultLoop

from .checks import assert_clients_exactly_once, assert_log_exactly_once, wait_for_results
from .clients import Tracked, run_clients
from .kube import Kube
from .production import Production, new_production, start_producer, wait_producer
from .progress import progress
from .redis_link import RedisLink
from .release import Release
from .settings import CLIENTS, DRIVER_SELECTOR, GATEWAY_SELECTOR, PRODUCE_SECONDS, PRODUCER_GRACE_S, RESULTS_TIMEOUT
from .views import views_for


def scenario(kube: Kube, redis_link: RedisLink, release: Release, faults: FaultLoop | None,
             after: Callable[[], None] = lambda: None, *, seconds: float = PRODUCE_SECONDS,
             clients: int = CLIENTS, results_timeout: float = RESULTS_TIMEOUT,
             producer_off_node: str | None = None) -> tuple[list[Tracked], Production]:
    """``clients`` connect, and one filtered client per view of ``views.py``; a producer runs for
    ``seconds`` with ``faults`` (never on ``producer_off_node``, the node the faults take away); ``after()``
    (e.g. wait for a new driver); then every expected result is committed and every client has caught up."""
    kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
    assert kube.driver() is not None, f"no running driver ({DRIVER_SELECTOR})"
    production = new_production(release, seconds, redis_link.log(release.stream))

    def during() -> None:
        filtered = len(views_for(release.tenant_token))
        progress(f"{clients} clients and {filtered} filtered ones connected; "
                 f"producing {production.count} events over {seconds:.0f}s")
        start_producer(kube, release, production, off_node=producer_off_node)
        if faults is None:
            wait_producer(kube, production, timeout=seconds + PRODUCER_GRACE_S)
        else:
            with faults:
                wait_producer(kube, production, timeout=seconds + PRODUCER_GRACE_S)
        progress("producer done")
        after()
        wait_for_results(redis_link, release, production, timeout=results_timeout)
        progress("every expected result committed; waiting for the clients to catch up")

    def head() -> int:
        log = redis_link.log(release.stream)
        return log[-1].seq if log else 0

    tracked = asyncio.run(run_clients(clients, release.ws_url, release.token, during, head,
                                      views=views_for(release.tenant_token), tenant_token=release.tenant_token))
    return tracked, production


def check_exactly_once(clients: list[Tracked], production: Production, redis_link: RedisLink, release: Release,
                       kube: Kube) -> None:
    log = redis_link.log(release.stream)
    assert_log_exactly_once(log, production, release)
    assert_clients_exactly_once(clients, log, kube.events)
    progress(f"exactly once: {len(clients)} clients, {len(log)} entries in the stream")
