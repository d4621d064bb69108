"""One SparkSession in the test process for the ``sparkwire.spark`` API tests (its JVM starts once)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sparkwire.spark.runtime.session import QUICK_JIT, spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session("sparkwire-api-tests", master="local[2]", java_options=QUICK_JIT)  # as a driver runs
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()
