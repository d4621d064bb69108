"""The driver's counters read from its metrics, and the log kept across failovers: its epoch, no tail loss."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sparkwire_harness.kind import replicated
from sparkwire_harness.kind.replicated import Replicated, metric_values

METRICS = """# HELP sparkwire_job_tail_losses_total Tail losses.
# TYPE sparkwire_job_tail_losses_total counter
sparkwire_job_tail_losses_total 0.0
sparkwire_job_tail_losses_total_created 1.7e9
sparkwire_job_batches_republished_total 3.0
sparkwire_job_commits_total{stream="metrics"} 12.0
"""


def test_unlabelled_samples_by_exact_name() -> None:
    names = ("sparkwire_job_tail_losses_total", "sparkwire_job_batches_republished_total", "absent")
    assert metric_values(METRICS, names) == {"sparkwire_job_tail_losses_total": 0.0,
                                            "sparkwire_job_batches_republished_total": 3.0}


class FakeLink:
    def __init__(self, epoch: str, counters: dict[str, int]) -> None:
        self.meta_value = SimpleNamespace(epoch=epoch, counters=counters)

    def meta(self, _stream: str) -> Any:
        return self.meta_value


def kept(link: FakeLink, counters: dict[str, float] | str, monkeypatch: pytest.MonkeyPatch) -> dict[str, float] | str:
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(replicated, "aggregator_counters", lambda names: asked.append(names) or counters)
    result = Replicated(link, "metrics", "e1").assert_log_kept("sparkwire_job_batches_republished_total")  # type: ignore[arg-type]
    assert asked == [("sparkwire_job_tail_losses_total", "sparkwire_job_batches_republished_total")]
    return result


def test_the_same_epoch_and_no_tail_loss_pass_and_return_the_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    counters = {"sparkwire_job_tail_losses_total": 0.0}
    assert kept(FakeLink("e1", {"rebuilds": 0}), counters, monkeypatch) == counters
    assert kept(FakeLink("e1", {}), "unreachable: refused", monkeypatch) == "unreachable: refused"


def test_a_new_epoch_or_a_tail_loss_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionError, match="a new epoch: e1 -> "):
        kept(FakeLink("e2", {}), {}, monkeypatch)
    with pytest.raises(AssertionError, match="tail_losses"):
        kept(FakeLink("e1", {"tail_losses": 1}), {}, monkeypatch)
    with pytest.raises(AssertionError, match="sparkwire_job_tail_losses_total"):
        kept(FakeLink("e1", {}), {"sparkwire_job_tail_losses_total": 1.0}, monkeypatch)
