"""Which part of the package may import which: the clients speak the protocol, not the gateway's
internals; the Spark job runs in an image without the local stack; the protocol does no I/O; the public Spark
API and its examples know no built-in job."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SERVICES = Path(__file__).resolve().parents[2] / "services"

FORBIDDEN = {
    "client": ["sparkwire.gateway", "sparkwire.stack", "sparkwire.replaylog", "sparkwire.spark", "redis"],
    "aggregator": ["sparkwire.stack", "sparkwire.gateway", "sparkwire.client"],
    # The public Spark API knows no job of its own; examples use nothing but it (as a team's job would).
    "spark": ["sparkwire.aggregator", "sparkwire.examples", "sparkwire.stack", "sparkwire.gateway", "sparkwire.client",
              "sparkwire.chaos", "sparkwire.verify"],
    "examples": ["sparkwire.aggregator", "sparkwire.stack", "sparkwire.gateway", "sparkwire.client", "sparkwire.chaos",
                 "sparkwire.verify", "sparkwire.replaylog.writer", "sparkwire.spark.sink"],
    # The protocol depends on nothing else of sparkwire: it owns the types it sends (protocol/items.py).
    "protocol": ["sparkwire.gateway", "sparkwire.client", "sparkwire.stack", "sparkwire.replaylog", "sparkwire.spark",
                 "redis", "starlette", "websockets"],
    "replaylog": ["sparkwire.gateway", "sparkwire.client", "sparkwire.stack", "sparkwire.aggregator"],
    # The gateway reaches its store through the log port (replaylog/port.py): every Redis command lives in
    # replaylog, so the gateway runs on the in-memory store in tests as it runs on Redis in pods.
    "gateway": ["redis", "sparkwire.stack", "sparkwire.client", "sparkwire.spark", "sparkwire.replaylog.reader",
                "sparkwire.replaylog.async_reader", "sparkwire.replaylog.writer"],
    "verify": ["sparkwire.stack", "sparkwire.gateway"],
}


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


@pytest.mark.parametrize(("package", "forbidden"), sorted(FORBIDDEN.items()))
def test_a_package_imports_nothing_it_must_not(package: str, forbidden: list[str]) -> None:
    offending = {
        f"{path.relative_to(SERVICES)}: {module}"
        for path in (SERVICES / package).rglob("*.py")
        for module in imported_modules(path)
        if any(module == name or module.startswith(name + ".") for name in forbidden)
    }
    assert not offending


# What importing a module loads, transitively: the static check above sees one file's own imports; this
# one sees what a user gets. The client and the protocol are what a browser-side or Python consumer
# installs (`pip install 'sparkwire[client]'`): no Redis, no Spark, no server.
TRANSITIVELY_FORBIDDEN = {
    "sparkwire.protocol": ["sparkwire.replaylog", "sparkwire.gateway", "sparkwire.client", "redis", "tenacity",
                           "pyspark", "starlette", "uvicorn", "websockets"],
    "sparkwire.client": ["sparkwire.replaylog", "sparkwire.gateway", "sparkwire.spark", "redis", "tenacity",
                         "pyspark", "starlette", "uvicorn", "prometheus_client", "jwt"],
}


@pytest.mark.parametrize(("module", "forbidden"), sorted(TRANSITIVELY_FORBIDDEN.items()))
def test_importing_a_module_loads_nothing_it_must_not(module: str, forbidden: list[str]) -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", f"import sys, {module}; print('\\n'.join(sys.modules))"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    assert module in loaded
    offending = sorted(name for name in loaded if any(name == f or name.startswith(f + ".") for f in forbidden))
    assert not offending, f"importing {module} loads {offending}"
