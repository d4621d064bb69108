"""docs/deliver-your-own-query.md runs as written: its ``python`` blocks in order in one namespace (in this
process, on the session's SparkSession), its ``sh`` blocks with bash; against a real Kafka broker, Redis and
gateway. What the page would draw is then checked against the orders the page sent."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkwire_harness.stack import KafkaBroker, RedisServer, free_port

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[3] / "docs" / "deliver-your-own-query.md"
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    return [(match.group(1), match.group(2)) for match in BLOCK.finditer(DOC.read_text())]


@pytest.fixture
def doc_environment(kafka_broker: KafkaBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    kafka_broker.create_topic("orders", partitions=2)
    with RedisServer(tmp_path / "redis") as redis_server:
        monkeypatch.setenv("KAFKA", kafka_broker.bootstrap)
        monkeypatch.setenv("REDIS_URL", redis_server.url)
        monkeypatch.setenv("SPARKWIRE_PORT", str(free_port()))
        monkeypatch.setenv("CHECKPOINT", str(tmp_path / "checkpoint"))
        monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        yield


def expected_windows(orders: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, str]]:
    """(windowStart, region) -> (orders, revenue) over 10 s windows sliding by 5 s, each orderId once."""
    found: dict[tuple[str, str], list[Decimal]] = {}
    for order in {o["orderId"]: o for o in reversed(orders)}.values():
        for start in (order["ts"] - order["ts"] % 5_000 - 5_000, order["ts"] - order["ts"] % 5_000):
            stamp = dt.datetime.fromtimestamp(start / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
            found.setdefault((stamp, order["region"]), []).append(Decimal(order["amount"]))
    return {key: (len(amounts), str(sum(amounts))) for key, amounts in found.items()}


def test_own_query_docs_page_runs_as_written(spark: Any, doc_environment: None,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {"__name__": "deliver_your_own_query"}
    background: list[subprocess.Popen[bytes]] = []
    kinds = Counter(kind for kind, _ in blocks())
    assert kinds["python"] >= 4 and kinds["sh"] >= 1
    try:
        for kind, code in blocks():
            if kind == "python":
                exec(compile(code, str(DOC), "exec"), namespace)
            else:
                process = subprocess.Popen(["bash", "-c", code], start_new_session=True)
                background.append(process)
                assert process.wait(timeout=60) == 0  # the block returns; a trailing & keeps its server running
    finally:
        for process in background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        if "running" in namespace and namespace["running"].isActive:
            namespace["running"].stop()

    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "Revenue per region update ['orders', 'revenue']"
    drawn = {(d["windowStart"], d["region"]): (d["orders"], d["revenue"]) for d in namespace["latest"].values()}
    assert drawn == expected_windows([*namespace["orders"], namespace["orders"][0]])
    assert len(printed) == 1 + len(drawn)
