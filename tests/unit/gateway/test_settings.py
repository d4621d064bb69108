"""The ack policy a pod asks of a joining client: the configured one, stretched with the pod's load."""

from __future__ import annotations

import pytest

from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.protocol.limits import MAX_ACK_INTERVAL_MS


def settings(ack_every: int = 1000, ack_interval_ms: int = 1000, acks_per_second: int = 1000) -> ConnectionSettings:
    return ConnectionSettings(ack_every=ack_every, ack_interval_ms=ack_interval_ms, hello_timeout_s=10,
                              max_client_frame_bytes=8192, max_server_frame_bytes=1 << 20, page_size=500,
                              auth_secret="", acks_per_second=acks_per_second)


@pytest.mark.parametrize(("connections", "expected"), [
    (0, (1000, 1000)), (1, (1000, 1000)), (1000, (1000, 1000)),  # within the budget: as configured
    (2500, (2500, 2500)), (5000, (5000, 5000)),  # stretched: 5,000 clients ack once per 5 s, 1,000/s in all
    (10_000, (10_000, MAX_ACK_INTERVAL_MS)), (50_000, (10_000, MAX_ACK_INTERVAL_MS)),  # capped
])
def test_clients_of_a_busy_pod_are_asked_to_ack_less_often_within_a_cap(
    connections: int, expected: tuple[int, int]
) -> None:
    assert settings().ack_policy(connections) == expected


def test_the_stretch_keeps_the_ratio_of_count_to_interval_and_never_shortens_a_configured_interval() -> None:
    assert settings(ack_every=100, ack_interval_ms=2000, acks_per_second=500).ack_policy(1000) == (200, 4000)
    assert settings(ack_interval_ms=30_000).ack_policy(100_000) == (1000, 30_000)
