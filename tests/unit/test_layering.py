"""Which part of the package may import which: the clients speak the protocol, not the gateway's
internals; the Spark job runs in an image without the local stack; the protocol does no I/O; the public Spark
API and its examples know no built-in job."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICES = Path(__file__).resolve().parents[2] / "services"

FORBIDDEN = {
    "client": ["sparkwire.gateway", "sparkwire.stack"],
    "aggregator": ["sparkwire.stack", "sparkwire.gateway", "sparkwire.client"],
    # The public Spark API knows no job of its own; examples use nothing but it (as a team's job would).
    "spark": ["sparkwire.aggregator", "sparkwire.examples", "sparkwire.stack", "sparkwire.gateway", "sparkwire.client",
              "sparkwire.chaos", "sparkwire.verify"],
    "examples": ["sparkwire.aggregator", "sparkwire.stack", "sparkwire.gateway", "sparkwire.client", "sparkwire.chaos",
                 "sparkwire.verify", "sparkwire.replaylog.writer", "sparkwire.spark.sink"],
    "protocol": ["sparkwire.gateway", "sparkwire.client", "sparkwire.stack", "redis", "starlette", "websockets"],
    "replaylog": ["sparkwire.gateway", "sparkwire.client", "sparkwire.stack", "sparkwire.aggregator"],
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
