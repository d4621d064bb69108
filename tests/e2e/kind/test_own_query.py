"""A team's own query on Kubernetes: the orders example (``sparkwire.examples.orders``, update mode) added to
the running release as a chart job (``jobs:``, its own SparkApplication, checkpoint and stream, served by the
same gateways), then under load its driver pod deleted and its replay log lost. Afterwards the stream holds
the newest revision of every result exactly as computed from the orders sent, each result's revisions rise
in seq order with no repeat, the loss was rebuilt from Kafka (one rebuild, nothing marked lost), and a client
reading through the ingress holds the stream's state with no duplicate and no gap. The release is rolled
back afterwards (the job, its stream's pods and its checkpoint go; later tests see the release as before).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sparkwire.client import StreamClient
from sparkwire.examples.orders.expected import Revision, delivered_revisions, expected_final, latest
from sparkwire.examples.orders.produce import generate
from sparkwire_harness.kind.ingress import ws_url
from sparkwire_harness.kind.jobs import start_kafka_client_job, wait_job
from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.progress import progress
from sparkwire_harness.kind.redis_link import RedisLink
from sparkwire_harness.kind.release import Release, client_token
from sparkwire_harness.kind.settings import CHART, FULLNAME, GATEWAY_SELECTOR, NAMESPACE, RELEASE
from sparkwire_harness.kind.tools import Tools

WINDOW_MS, SLIDE_MS = 10_000, 5_000
RATE, SECONDS = 20.0, 60


@pytest.fixture
def orders_job(tools: Tools, kube: Kube, tmp_path: Path) -> Iterator[str]:
    """The release upgraded with the orders job on a stream (and topic) of its own; rolled back afterwards."""
    name = f"o{int(time.time()) % 10**6}"
    values = {"jobs": [{
        "name": name, "stream": name, "module": "sparkwire.examples.orders", "kafkaTopic": name,
        "env": [{"name": "ORDERS_TOPIC", "value": name}, {"name": "ORDERS_WINDOW_MS", "value": str(WINDOW_MS)},
                {"name": "ORDERS_SLIDE_MS", "value": str(SLIDE_MS)}, {"name": "ORDERS_TRIGGER_MS", "value": "1000"}],
        "checkpoint": {"size": "256Mi", "keep": False},
    }]}
    path = tmp_path / "orders-job.yaml"
    path.write_text(yaml.safe_dump(values))
    revision = tools.revision()
    progress(f"helm upgrade: the orders job {name} on stream {name}")
    try:  # rolled back even when the upgrade fails: a release left failed would fail the tests after this one
        tools.helm("upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values", "-f", str(path),
                   *tools.image_values(), "--wait", "--timeout", "5m", timeout=420)
        kube.wait_rolled_out()
        yield name
    finally:
        tools.helm("rollback", RELEASE, str(revision), "--namespace", NAMESPACE, "--wait", "--timeout", "5m",
                   timeout=420)
        kube.wait_rolled_out()


def driver_selector(job: str) -> str:
    return f"spark-role=driver,sparkoperator.k8s.io/app-name={FULLNAME}-job-{job}"


def wait_for_driver(kube: Kube, job: str, not_uid: str | None, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [p for p in kube.running(driver_selector(job)) if p.metadata.uid != not_uid]
        if running:
            return str(running[0].metadata.uid)
        time.sleep(2)
    raise AssertionError(f"no running driver of job {job} after {timeout}s: {kube.events[-10:]}")


def newest(redis_link: RedisLink, stream: str) -> dict[tuple[str, str], Revision]:
    found, _problems = delivered_revisions(redis_link.log(stream))
    return latest(found)


@pytest.mark.timeout(1500)
def test_own_query_orders_job_on_kind_through_a_driver_kill_and_a_lost_log(
    kube: Kube, redis_link: RedisLink, release: Release, orders_job: str,
) -> None:
    stream = orders_job
    driver_uid = wait_for_driver(kube, stream, None, timeout=420)
    kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
    gateway = kube.gateway_deployment()
    token = client_token(kube, gateway, stream)
    start_ms = int(time.time() * 1000) + 5_000
    seed, count = int(time.time()) % 10_000, int(SECONDS * RATE)
    expected = expected_final(generate(seed, count, start_ms, RATE), WINDOW_MS, SLIDE_MS)
    url = ws_url(stream)

    async def run() -> tuple[StreamClient, dict[tuple[str, str], Revision], dict[str, int]]:
        client = StreamClient(url, token=token, keep_applied=True)
        task = asyncio.create_task(client.run())
        try:
            await asyncio.to_thread(scenario)
            deadline = time.monotonic() + 300
            got: dict[tuple[str, str], Revision] = {}
            while time.monotonic() < deadline:
                got = await asyncio.to_thread(newest, redis_link, stream)
                if got == expected:
                    break
                await asyncio.sleep(3)
            head = redis_link.log(stream)[-1].seq
            while time.monotonic() < deadline and (client.applied[-1:] or [(0, "")])[-1][0] < head:
                await asyncio.sleep(0.5)
            state = {key: item.processing_id for key, item in client.state.items()}
            return client, got, state
        finally:
            await client.stop()
            await asyncio.gather(task, return_exceptions=True)

    def scenario() -> None:
        name = f"orders-{stream}"
        start_kafka_client_job(kube, release.gateway_image, name, [
            "python", "-m", "sparkwire.examples.orders.produce", "--bootstrap-servers", release.bootstrap_servers,
            "--topic", stream, "--count", str(count), "--rate", str(RATE), "--seed", str(seed),
            "--start-ms", str(start_ms)])
        # The kill and the loss come once the job has committed (its first batch can take over 20 s when
        # the node is busy: a loss before any commit would lose nothing).
        deadline = time.monotonic() + 240
        while redis_link.meta(stream).last_seq == 0:
            assert time.monotonic() < deadline, f"the orders job committed nothing in 240 s: {kube.events[-10:]}"
            time.sleep(2)
        driver = kube.running(driver_selector(stream))[0]
        progress(f"deleting the orders driver {driver.metadata.name}")
        kube.delete_pod(driver.metadata.name, grace_seconds=0)
        time.sleep(15)
        before = redis_link.meta(stream)
        deleted = redis_link.call(lambda r: r.delete(*r.keys(f"sparkwire:{{{stream}}}:*")))
        progress(f"the orders log lost: {deleted} keys deleted (epoch {before.epoch}, seq {before.last_seq})")
        wait_job(kube, name, timeout=SECONDS + 120)
        wait_for_driver(kube, stream, driver_uid, timeout=300)

    client, got, state = asyncio.run(run())

    assert got == expected, {k: (got.get(k), expected.get(k)) for k in set(got) ^ set(expected) or list(expected)[:3]}
    log = redis_link.log(stream)
    _found, problems = delivered_revisions(log)
    assert not problems, problems[:5]
    meta = redis_link.meta(stream)
    assert meta.counters.get("rebuilds") == 1 and "history_lost" not in meta.counters, meta
    descriptor = json.loads(redis_link.call(lambda r: r.get(f"sparkwire:{{{stream}}}:descriptor")))
    assert (descriptor["mode"], descriptor["rebuild"]) == ("update", "available")
    stats = client.stats()
    assert stats.gaps == 0, stats
    applied = [pid for _seq, pid in client.applied]
    assert len(applied) == len(set(applied)), stats  # every revision rendered once
    # Not 0 duplicates: the batch the killed driver had committed before the log was lost comes again in the
    # new epoch with the same entry ids, after that epoch's snapshot; a client that saw it skips it (counted
    # as duplicates) and its state still follows the log (ClientSession._on_entries).
    log_state = {entry.key: entry.processing_id for entry in log}  # the last entry of each key
    assert state == log_state, stats
    progress(f"own query on kind: {len(expected)} results, {len(log)} revisions after the rebuild, client resets "
             f"{stats.resets}, {stats.duplicates} re-committed revisions skipped")
