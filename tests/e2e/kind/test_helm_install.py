"""The first-install experience, on the kind cluster: `helm uninstall`, the release's volumes deleted, then
`helm install` with the values the README gives for kind — every pod Ready, the operator's driver and
executor running, results committed, the connect line of the chart's NOTES and the demo page working
through the ingress, and `helm test` passing; then an uninstall and install again that keeps the Redis
claim: same password, same stream.

Destructive (uninstalls the release, deletes its claims and kept Secret), so conftest.py runs this module
last; it leaves the release installed from release.env's images, as `make kind-up` does.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from sparkwire.replaylog.model import Entry
from sparkwire_harness.kind.checks import assert_log_exactly_once, wait_for_results
from sparkwire_harness.kind.ingress import http_get
from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.production import new_production, start_producer, wait_producer
from sparkwire_harness.kind.progress import progress
from sparkwire_harness.kind.redis_link import RedisLink
from sparkwire_harness.kind.release import read_release
from sparkwire_harness.kind.settings import (
    FULLNAME,
    GATEWAY_SELECTOR,
    HTTP,
    NAMESPACE,
    PRODUCER_GRACE_S,
    REDIS_CLAIM,
    REDIS_SELECTOR,
    RELEASE,
    RELEASE_SELECTOR,
    RESULTS_TIMEOUT,
)
from sparkwire_harness.kind.tools import Tools

pytestmark = pytest.mark.slow

INSTALL_TIMEOUT = 720  # helm's own --timeout is 10m: Kafka's first start, the topics hook, three gateways
PRODUCE_SECONDS = 20
REPLAYED = 20  # entries the NOTES client asks back with its cursor


def uninstall(kube: Kube, tools: Tools) -> None:
    tools.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found", "--wait", "--timeout", "5m",
               timeout=420)
    # The workloads are gone when helm returns; their pods (and the driver, owned by the SparkApplication)
    # are removed by the garbage collector after it.
    kube.wait_no_pods(RELEASE_SELECTOR, timeout=240)
    progress("release uninstalled, its pods gone")


def install(tools: Tools) -> None:
    tools.helm("install", *tools.install_args(), "--wait", "--timeout", "10m", timeout=INSTALL_TIMEOUT)


def pairs(entries: list[Entry]) -> list[tuple[int, str]]:
    return [(e.seq, e.processing_id) for e in entries]


# --- the chart's NOTES ------------------------------------------------------------------------------------

NOTES_WS_URL = re.compile(
    r"(?P<scheme>wss?)://(?P<host><[^>\n]*>|[^\s/]+)(?P<path>/ws\?stream=(?P<stream>[A-Za-z0-9_.-]{1,64}))")


@dataclass(frozen=True)
class NotesConnect:
    """The connect line of the NOTES, as a client on this machine uses it: the ingress is at ``HTTP``, and
    a host name the NOTES give is what the ingress routes by (the Host header)."""

    url: str
    host: str | None
    stream: str

    @staticmethod
    def parse(notes: str) -> NotesConnect:
        match = NOTES_WS_URL.search(notes)
        assert match, f"no ws:// connect line in the NOTES:\n{notes}"
        assert "port-forward" not in notes, f"the NOTES give a port-forward, not the ingress:\n{notes}"
        assert match["scheme"] == "ws", f"the NOTES give {match['scheme']}://, but kind's ingress has no TLS"
        placeholder = match["host"].startswith("<")  # hosts: [] routes any host; the NOTES cannot name it
        host = None if placeholder else match["host"]
        authority = urlsplit(HTTP).netloc if placeholder else match["host"]
        return NotesConnect(f"ws://{authority}{match['path']}", host, match["stream"])

    def socket_to_ingress(self) -> socket.socket:
        address = urlsplit(HTTP)
        return socket.create_connection((address.hostname or "127.0.0.1", address.port or 80), timeout=10)



async def _frame(ws: ClientConnection) -> dict[str, object]:
    """The next frame that is not a ping (answered: the gateway closes clients that stay silent)."""
    while True:
        frame: dict[str, object] = json.loads(await ws.recv())
        if frame.get("type") != "ping":
            return frame
        await ws.send(json.dumps({"type": "pong", "t": frame["t"]}))


@dataclass(frozen=True)
class NotesRead:
    epoch: str
    head: int
    after: int
    received: list[tuple[int, str]]


async def read_through_notes(notes: NotesConnect, token: str | None) -> NotesRead:
    """A new client on the NOTES' URL gets a welcome and a snapshot; one resuming from a cursor
    ``REPLAYED`` entries back gets exactly the entries after it. A fresh install requires a token (the
    NOTES say how to mint one from the generated secret): without one the gateway refuses the client."""
    async with asyncio.timeout(60):
        async with connect(notes.url, sock=notes.socket_to_ingress(), open_timeout=10, max_size=None) as ws:
            await ws.send(json.dumps({"type": "hello", "v": 1}))
            # Refused, and told why first: the error frame (docs/protocol.md), then the close, both 4401.
            error = await _frame(ws)
            assert error.get("type") == "error" and error.get("code") == 4401, error
            assert error.get("name") == "auth_failed" and "token" in str(error.get("reason")), error
            with pytest.raises(ConnectionClosed) as refused:
                await _frame(ws)
            assert refused.value.rcvd is not None and refused.value.rcvd.code == 4401, refused.value
        async with connect(notes.url, sock=notes.socket_to_ingress(), open_timeout=10, max_size=None) as ws:
            await ws.send(json.dumps({"type": "hello", "v": 1, "token": token}))
            welcome = await _frame(ws)
            assert welcome.get("type") == "welcome" and welcome.get("reset") == "no_position", welcome
            epoch, head = str(welcome["epoch"]), int(str(welcome["headSeq"]))
            part = await _frame(ws)
            while part.get("type") == "snapshot" and part.get("more"):
                part = await _frame(ws)
            assert part.get("type") == "snapshot" and part.get("epoch") == epoch and part.get("items"), part
        after = max(0, head - REPLAYED)
        received: list[tuple[int, str]] = []
        async with connect(notes.url, sock=notes.socket_to_ingress(), open_timeout=10, max_size=None) as ws:
            await ws.send(json.dumps({"type": "hello", "v": 1, "cursor": {"epoch": epoch, "seq": after},
                                      "token": token}))
            welcome = await _frame(ws)
            assert welcome.get("type") == "welcome" and welcome.get("recovered") is True, welcome
            while not received or received[-1][0] < head:
                frame = await _frame(ws)
                assert frame.get("type") == "entries" and frame.get("epoch") == epoch, frame
                entries = frame["entries"]
                assert isinstance(entries, list)
                received += [(int(e["seq"]), str(e["processingId"])) for e in entries]
    return NotesRead(epoch, head, after, received)


# --- the tests --------------------------------------------------------------------------------------------


@pytest.mark.timeout(1500)
def test_first_install(kube: Kube, tools: Tools) -> None:
    uninstall(kube, tools)
    # Redis's and Kafka's StatefulSet claims, the kept checkpoint claim and the kept Redis Secret outlive
    # an uninstall; a first install starts without them.
    kube.delete_leftovers(RELEASE_SELECTOR, timeout=180)
    install(tools)

    driver, executors = kube.wait_for_spark_pods(timeout=420)
    progress(f"driver {driver.metadata.name} and executors {[e.metadata.name for e in executors]} running")
    pods = kube.wait_all_ready(RELEASE_SELECTOR, timeout=180)
    components = {(p.metadata.labels or {}).get("app.kubernetes.io/component") for p in pods}
    assert {"gateway", "redis", "kafka", "aggregator"} <= components, components
    gateways = kube.gateway_deployment().spec.replicas
    assert len(kube.ready_pods(GATEWAY_SELECTOR)) == gateways

    release = read_release(kube)
    link = RedisLink(kube)
    try:
        assert link.log(release.stream) == [], "a first install starts with an empty stream"
        production = new_production(release, PRODUCE_SECONDS, [])
        start_producer(kube, release, production)
        wait_producer(kube, production, timeout=PRODUCE_SECONDS + PRODUCER_GRACE_S)
        wait_for_results(link, release, production, timeout=RESULTS_TIMEOUT)
        log = link.log(release.stream)
        assert_log_exactly_once(log, production, release)
        progress(f"{len(log)} results committed")

        notes_text = tools.helm("get", "notes", RELEASE, "--namespace", NAMESPACE, timeout=60)
        notes = NotesConnect.parse(notes_text)
        assert notes.stream == release.stream, notes
        assert release.token is not None, "a fresh install runs with authentication on"
        assert "sparkwire token --streams" in notes_text, "the NOTES say how to mint a token"
        read = asyncio.run(read_through_notes(notes, release.token))
        log = link.log(release.stream)
        assert read.epoch == link.meta(release.stream).epoch
        expected = [(e.seq, e.processing_id) for e in log if read.after < e.seq <= read.head]
        assert expected, f"nothing to replay after seq {read.after}"
        assert [p for p in read.received if p[0] <= read.head] == expected
        progress(f"{notes.url}: snapshot, then entries {read.after + 1}..{read.head} replayed through the ingress")
    finally:
        link.close()

    status, page = http_get(f"/?stream={release.stream}", notes.host)
    assert status == 200 and "<title>sparkwire live</title>" in page, (status, page[:300])
    [script] = re.findall(r'from "(/static/sparkwire-client\.js)"', page)
    status, source = http_get(script, notes.host)
    assert status == 200 and "export class SparkwireClient" in source, (status, source[:300])

    # `helm test`, as an operator runs it after an install: the chart's test pod (templates/tests/) waits for
    # the gateway Service to answer ready, then reads the stream's snapshot with a token it mints (401 without).
    output = tools.helm("test", RELEASE, "--namespace", NAMESPACE, "--logs", "--timeout", "5m", timeout=360)
    assert re.search(r"Phase:\s+Succeeded", output), output
    assert f"stream {release.stream}: epoch" in output and "with a minted token; 401 without" in output, output
    progress("helm test: the chart's test pod passed")


@pytest.mark.timeout(1200)
def test_reinstall_keeps_the_redis_claim(kube: Kube, tools: Tools) -> None:
    stream = read_release(kube).stream
    password_before = kube.redis_password()
    auth_before = kube.secret_value(f"{FULLNAME}-gateway-auth", ("auth-secret",))
    claim_before = kube.core.read_namespaced_persistent_volume_claim(REDIS_CLAIM, NAMESPACE).metadata.uid
    link = RedisLink(kube)
    try:
        meta_before, log_before = link.meta(stream), link.log(stream)
    finally:
        link.close()
    assert log_before, "the stream is empty: nothing to keep (test_first_install, before this, fills it)"

    uninstall(kube, tools)
    claim_kept = kube.core.read_namespaced_persistent_volume_claim(REDIS_CLAIM, NAMESPACE).metadata.uid
    assert claim_kept == claim_before, "helm uninstall must leave the StatefulSet's claim"
    install(tools)
    kube.wait_ready(REDIS_SELECTOR, 1)
    claim_after = kube.core.read_namespaced_persistent_volume_claim(REDIS_CLAIM, NAMESPACE).metadata.uid
    assert claim_after == claim_before, "the new Redis pod must mount the kept claim, not a new one"

    link = RedisLink(kube)  # reads the Secret as it is now
    try:
        meta_after, log_after = link.meta(stream), link.log(stream)
    finally:
        link.close()
    assert meta_after.epoch == meta_before.epoch, "a new epoch: the log was not kept"
    assert meta_after.last_seq >= meta_before.last_seq, (meta_before, meta_after)
    assert pairs(log_after[: len(log_before)]) == pairs(log_before), "the entries from before must be there"
    progress(f"the stream kept its epoch and {len(log_before)} entries")

    same_auth = kube.secret_value(f"{FULLNAME}-gateway-auth", ("auth-secret",)) == auth_before
    assert same_auth, ("the reinstall generated a new gateway token secret: every token handed out is now "
                       "refused (gateway.auth.keepSecret: helm.sh/resource-policy keep, and lookup)")
    same_password = kube.redis_password() == password_before  # compared, never printed
    assert same_password, (
        f"the reinstall put a new Redis password into Secret {FULLNAME}-redis although the data it protects "
        "was kept: anything outside the release holding the old one (a client's URL, another app) is locked "
        "out. The chart reuses the live Secret's password (lookup), so the Secret must outlive the uninstall "
        "(redis.auth.keepSecret: helm.sh/resource-policy keep).")
