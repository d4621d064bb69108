"""A team's own queries on Kubernetes: the orders example (``sparkwire.examples.orders``, update mode) and the
large-orders feed (``sparkwire.examples.large_orders``, Spark's real-time mode, reading the same topic) added
to the running release as chart jobs (``jobs:``, each its own SparkApplication, checkpoint and stream, served
by the same gateways; the real-time one with a task slot per source partition, which the chart checks), then
under load both drivers' pods deleted and the orders replay log lost. Afterwards the orders stream holds the
newest revision of every result exactly as computed from the orders sent, each result's revisions rise in seq
order with no repeat, the loss was rebuilt from Kafka (one rebuild, nothing marked lost), and a client reading
through the ingress holds the stream's state with no duplicate and no gap; the feed holds one entry per
record of a large order sent, none twice, in gap-free seqs, and its client rendered each once. The release is
rolled back afterwards (the jobs, their pods and checkpoints go; later tests see the release as before).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from sparkwire.client import StreamClient
from sparkwire.examples.large_orders.expected import expected_fields, feed_fields
from sparkwire.examples.orders.expected import Revision, delivered_revisions, expected_final, latest
from sparkwire.examples.orders.produce import generate
from sparkwire_harness.kind.ingress import ws_url
from sparkwire_harness.kind.jobs import start_kafka_client_job, wait_job
from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.objects import name
from sparkwire_harness.kind.progress import progress
from sparkwire_harness.kind.redis_link import RedisLink
from sparkwire_harness.kind.release import Release, client_token
from sparkwire_harness.kind.settings import CHART, FULLNAME, GATEWAY_SELECTOR, NAMESPACE, RELEASE
from sparkwire_harness.kind.tools import Tools

WINDOW_MS, SLIDE_MS = 10_000, 5_000
RATE, SECONDS = 20.0, 60
THRESHOLD = "500"
# A driver's log lines that tell what it did, for a failure message.
TELLING = ('"warning"', '"error"', '"session_started"', '"query_started"', '"query_terminated"', '"rebuild',
           '"log_lost', "Exception", " ERROR ")


def feed_job(name: str) -> dict[str, object]:
    """The large-orders feed on the orders job's topic, under real-time mode: two executors of one core for
    the topic's two partitions (30 s batches, so the driver's deletion comes in the middle of one)."""
    return {
        "name": f"{name}-rt", "stream": f"{name}-rt", "module": "sparkwire.examples.large_orders",
        "env": [{"name": "LARGE_ORDERS_TOPIC", "value": name}, {"name": "LARGE_ORDERS_THRESHOLD", "value": THRESHOLD},
                {"name": "LARGE_ORDERS_REALTIME_BATCH", "value": "30 seconds"}],
        "realtime": {"sourcePartitions": 2},
        "executor": {"instances": 2, "cores": 1, "coreRequest": "100m"},
        "checkpoint": {"size": "256Mi", "keep": False},
    }


@pytest.fixture
def orders_job(tools: Tools, kube: Kube, tmp_path: Path) -> Iterator[str]:
    """The release upgraded with the orders job on a stream (and topic) of its own; rolled back afterwards."""
    name = f"o{int(time.time()) % 10**6}"
    values = {"jobs": [{
        "name": name, "stream": name, "module": "sparkwire.examples.orders", "kafkaTopic": name,
        "env": [{"name": "ORDERS_TOPIC", "value": name}, {"name": "ORDERS_WINDOW_MS", "value": str(WINDOW_MS)},
                {"name": "ORDERS_SLIDE_MS", "value": str(SLIDE_MS)}, {"name": "ORDERS_TRIGGER_MS", "value": "1000"}],
        "checkpoint": {"size": "256Mi", "keep": False},
    }, feed_job(name)]}
    path = tmp_path / "orders-job.yaml"
    path.write_text(yaml.safe_dump(values))
    revision = tools.revision()
    progress(f"helm upgrade: the orders job {name} on stream {name}, the real-time feed {name}-rt beside it")
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


def feed_found(redis_link: RedisLink, stream: str) -> Counter[tuple[str, str, str, str]]:
    return Counter(feed_fields(json.loads(entry.data)) for entry in redis_link.log(stream))


@pytest.mark.timeout(1500)
def test_own_query_orders_job_on_kind_through_a_driver_kill_and_a_lost_log(
    kube: Kube, redis_link: RedisLink, release: Release, orders_job: str,
) -> None:
    stream, feed = orders_job, f"{orders_job}-rt"
    driver_uid = wait_for_driver(kube, stream, None, timeout=420)
    feed_driver_uid = wait_for_driver(kube, feed, None, timeout=420)
    kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
    gateway = kube.gateway_deployment()
    token, feed_token = client_token(kube, gateway, stream), client_token(kube, gateway, feed)
    start_ms = int(time.time() * 1000) + 5_000
    seed, count = int(time.time()) % 10_000, int(SECONDS * RATE)
    records = generate(seed, count, start_ms, RATE)
    expected = expected_final(records, WINDOW_MS, SLIDE_MS)
    expected_feed = expected_fields(records, Decimal(THRESHOLD))

    def drivers_log(job: str) -> str:
        """Why a job committed nothing, for a failure message: its application's attempts, and each driver's
        restarts, batches and the lines that tell (Spark turns to WARN once started: an idle driver's log
        ends with its start)."""
        status = kube.spark_application(f"{FULLNAME}-job-{job}").get("status", {})
        parts = [f"--- application {job}: {status.get('applicationState')}, execution attempts "
                 f"{status.get('executionAttempts')}, last submitted {status.get('lastSubmissionAttemptTime')}"]
        for pod in kube.pods(driver_selector(job)):
            restarts = sum(c.restart_count for c in pod.status.container_statuses or [])
            lines = kube.core.read_namespaced_pod_log(name(pod), NAMESPACE, tail_lines=3000).splitlines()
            batches = [line for line in lines if '"query_progress"' in line]
            telling = [line[:400] for line in lines if any(mark in line for mark in TELLING)]
            parts.append(f"--- {name(pod)} ({pod.status.phase}, started {pod.status.start_time}, {restarts} "
                         f"restarts, {len(batches)} batches): " + "\n".join(telling[-25:]))
        return "\n".join(parts)

    async def caught_up(client: StreamClient, name: str, deadline: float) -> None:
        log = redis_link.log(name)
        # Once seen in CI: the orders log still empty 300 s after the loss and the restart (a re-run passed):
        # say so with what the driver was doing, not with an IndexError.
        assert log, f"stream {name}: nothing committed 300 s after the loss: {kube.events[-10:]}\n{drivers_log(name)}"
        head = log[-1].seq
        while time.monotonic() < deadline and (client.applied[-1:] or [(0, "")])[-1][0] < head:
            await asyncio.sleep(0.5)

    async def run() -> tuple[StreamClient, StreamClient, dict[tuple[str, str], Revision], dict[str, int]]:
        client = StreamClient(ws_url(stream), token=token, keep_applied=True)
        feed_client = StreamClient(ws_url(feed), token=feed_token, keep_applied=True)
        tasks = [asyncio.create_task(client.run()), asyncio.create_task(feed_client.run())]
        try:
            await asyncio.to_thread(scenario)
            deadline = time.monotonic() + 300
            got: dict[tuple[str, str], Revision] = {}
            while time.monotonic() < deadline:
                got = await asyncio.to_thread(newest, redis_link, stream)
                if got == expected and await asyncio.to_thread(feed_found, redis_link, feed) == expected_feed:
                    break
                await asyncio.sleep(3)
            await caught_up(client, stream, deadline)
            await caught_up(feed_client, feed, deadline)
            state = {key: item.processing_id for key, item in client.state.items()}
            return client, feed_client, got, state
        finally:
            await client.stop()
            await feed_client.stop()
            await asyncio.gather(*tasks, return_exceptions=True)

    def scenario() -> None:
        name = f"orders-{stream}"
        start_kafka_client_job(kube, release.gateway_image, name, [
            "python", "-m", "sparkwire.examples.orders.produce", "--bootstrap-servers", release.bootstrap_servers,
            "--topic", stream, "--count", str(count), "--rate", str(RATE), "--seed", str(seed),
            "--start-ms", str(start_ms)])
        # The kills and the loss come once each job has committed (its first batch can take over 20 s when
        # the node is busy: a loss before any commit would lose nothing).
        deadline = time.monotonic() + 240
        while redis_link.meta(stream).last_seq == 0 or redis_link.meta(feed).last_seq == 0:
            assert time.monotonic() < deadline, f"a job committed nothing in 240 s: {kube.events[-10:]}"
            time.sleep(2)
        for job in (stream, feed):
            driver = kube.running(driver_selector(job))[0]
            progress(f"deleting the driver {driver.metadata.name}")
            kube.delete_pod(driver.metadata.name, grace_seconds=0)
        time.sleep(15)
        before = redis_link.meta(stream)
        deleted = redis_link.call(lambda r: r.delete(*r.keys(f"sparkwire:{{{stream}}}:*")))
        progress(f"the orders log lost: {deleted} keys deleted (epoch {before.epoch}, seq {before.last_seq})")
        wait_job(kube, name, timeout=SECONDS + 120)
        wait_for_driver(kube, stream, driver_uid, timeout=300)
        wait_for_driver(kube, feed, feed_driver_uid, timeout=300)

    client, feed_client, got, state = asyncio.run(run())

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

    # The real-time feed: every large order's record once, by its position, in gap-free seqs, each rendered once.
    feed_log = redis_link.log(feed)
    found_feed = feed_found(redis_link, feed)
    assert found_feed == expected_feed, (found_feed - expected_feed, expected_feed - found_feed)
    assert [entry.seq for entry in feed_log] == list(range(1, len(feed_log) + 1))
    assert len({entry.processing_id for entry in feed_log}) == len(feed_log)
    feed_applied = [pid for _seq, pid in feed_client.applied]
    assert feed_applied == [entry.processing_id for entry in feed_log], feed_client.stats()
    feed_meta = redis_link.meta(feed)
    progress(f"own query on kind: {len(expected)} results, {len(log)} revisions after the rebuild, client resets "
             f"{stats.resets}, {stats.duplicates} re-committed revisions skipped; real-time feed: {len(feed_log)} "
             f"entries, {feed_meta.counters.get('duplicates_suppressed', 0)} re-sent rows refused")
