"""Server-Sent Events through the cluster's real ingress (Traefik) to three gateway pods: the chart's SSE
Ingress and Service keep each client on the pod that holds its event stream (a sticky cookie), so every
frame it posts reaches its connection. Without the stickiness, a post would reach another pod and get 404
two times in three: six clients posting three frames each would all pass by chance once in 10^8 runs.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.progress import progress
from sparkwire_harness.kind.release import Release
from sparkwire_harness.kind.settings import GATEWAY_SELECTOR, HTTP

from ...integration.gateway.sse_client import SseConversation, sse_connection, until

pytestmark = pytest.mark.slow

CLIENTS, PINGS = 6, 3


def test_sse_clients_through_the_ingress_reach_their_own_connection_with_every_post(
    kube: Kube, release: Release
) -> None:
    # Every gateway Ready and none terminating (the test before may have rolled them out): a stream opened
    # on a terminating pod keeps serving while the ingress has already dropped that pod, so its sticky
    # cookie names a server the ingress no longer has and its posts go elsewhere (404 for a reason that is
    # not stickiness). Then a moment for the ingress to see the same endpoints.
    kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
    assert len(kube.wait_all_ready(GATEWAY_SELECTOR, 300)) == release.gateway_replicas
    time.sleep(5)
    hello = {"token": release.token} if release.token else {}

    async def client() -> tuple[list[int], SseConversation]:
        async with sse_connection(HTTP, release.stream, hello) as (conversation, task):
            await until(lambda: bool(conversation.frames), task, timeout=30)
            statuses = [await conversation.post({"type": "ping", "t": t}) for t in range(1, PINGS + 1)]
            if statuses == [204] * PINGS:
                await until(lambda: sum(f["type"] == "pong" for f in conversation.frames) == PINGS, task)
            return statuses, conversation

    async def run() -> list[tuple[list[int], SseConversation]]:
        return [await client() for _ in range(CLIENTS)]

    results = asyncio.run(run())
    for statuses, conversation in results:
        assert conversation.frames[0]["type"] == "welcome", conversation.frames[:2]
        assert statuses == [204] * PINGS, f"a post reached a pod without the connection: {statuses}"
        assert [f["t"] for f in conversation.frames if f["type"] == "pong"] == list(range(1, PINGS + 1))
    progress(f"{CLIENTS} SSE clients through Traefik: {CLIENTS * PINGS} posts, each to its own connection")
