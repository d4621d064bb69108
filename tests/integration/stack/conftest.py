"""Failure reports of the stack tests carry the log tails of the Kafka clusters the test used."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from sparkwire.stack import KafkaCluster


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, KafkaCluster):
                report.sections.append((f"{name}: Kafka node logs, last 40 lines each", value.log_tail(40)))
    return report
