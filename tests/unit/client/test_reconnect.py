"""Resume decisions after a close, and the backoff between attempts."""

from __future__ import annotations

import random

import pytest

from sparkwire.client import ReconnectPolicy, TerminalClose
from sparkwire.client.reconnect import next_step

POLICY = ReconnectPolicy(initial_delay_s=0.5, max_delay_s=4.0)


@pytest.mark.parametrize("code", [1000, 1003, 1008, 1009, 4400, 4401, 4403, 4404, 4426])
def test_terminal_codes_stop(code: int) -> None:
    step = next_step(code, attempt=0, welcomed=True, policy=POLICY, rng=random.Random(1))
    assert not step.reconnect


@pytest.mark.parametrize("code", [1001, 1006, 1011, 1012, 4408, 4409, 4429, 4503, 4999])
def test_resumable_codes_and_unknown_codes_reconnect(code: int) -> None:
    step = next_step(code, attempt=0, welcomed=False, policy=POLICY, rng=random.Random(1))
    assert step.reconnect
    assert 0.0 <= step.delay_s <= 0.5


def test_backoff_doubles_to_the_cap_with_full_jitter() -> None:
    rng = random.Random(7)
    for attempt, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (10, 4.0), (500, 4.0)]:
        delays = [POLICY.delay(attempt, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter spreads over the whole range
        assert min(delays) < ceiling * 0.2


def test_failures_in_a_row_grow_the_attempt_and_a_welcomed_connection_starts_over() -> None:
    rng = random.Random(3)
    step = next_step(1006, attempt=0, welcomed=False, policy=POLICY, rng=rng)
    step = next_step(1006, attempt=step.attempt, welcomed=False, policy=POLICY, rng=rng)
    assert step.attempt == 2
    assert next_step(1006, attempt=step.attempt, welcomed=True, policy=POLICY, rng=rng).attempt == 1


def test_going_away_and_a_client_gap_retry_at_once() -> None:
    rng = random.Random(3)
    assert next_step(1001, attempt=0, welcomed=True, policy=POLICY, rng=rng).delay_s == 0.0
    gap = next_step(1000, attempt=4, welcomed=True, policy=POLICY, rng=rng, client_gap=True)
    assert gap.reconnect and gap.delay_s == 0.0 and gap.attempt == 0


def test_terminal_close_names_the_code() -> None:
    error = TerminalClose(4401, "token expired")
    assert (error.code, error.name, error.reason) == (4401, "auth_failed", "token expired")
    assert "4401" in str(error) and "token expired" in str(error)
    assert TerminalClose(4999, "?").name == "unknown"


def test_an_expired_token_resumes_at_once_only_with_a_way_to_refresh_it() -> None:
    rng = random.Random(3)
    without = next_step(4419, attempt=0, welcomed=True, policy=ReconnectPolicy(), rng=rng)
    assert not without.reconnect
    with_hook = next_step(4419, attempt=0, welcomed=True, policy=ReconnectPolicy(), rng=rng, can_refresh_token=True)
    assert (with_hook.reconnect, with_hook.delay_s) == (True, 0.0)
    # A fresh token refused again at once is a failure run like any other: backoff applies.
    again = next_step(4419, attempt=1, welcomed=False, policy=ReconnectPolicy(initial_delay_s=1.0), rng=rng,
                      can_refresh_token=True)
    assert again.reconnect and again.attempt == 2
