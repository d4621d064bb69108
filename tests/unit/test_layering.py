"""Which part of the package may import which: the clients speak the protocol, not the gateway's
internals; the Spark job runs in an image without the local stack; the protocol does no I/O; the public Spark
API and its examples know no built-in job."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Each top-level package's folder: the product under services/, the test harness beside it.
PACKAGE_DIRS = {"sparkwire": ROOT / "services" / "sparkwire",
                "sparkwire_harness": ROOT / "harness" / "sparkwire_harness"}
HARNESS = ["sparkwire_harness"]

FORBIDDEN = {
    "sparkwire.client": ["sparkwire.gateway", "sparkwire.replaylog", "sparkwire.spark", "redis", *HARNESS],
    "sparkwire.aggregator": ["sparkwire.gateway", "sparkwire.client", *HARNESS],
    # The public Spark API knows no job of its own; examples use nothing but it (as a team's job would).
    "sparkwire.spark": ["sparkwire.aggregator", "sparkwire.examples", "sparkwire.gateway", "sparkwire.client",
                        *HARNESS],
    "sparkwire.examples": ["sparkwire.aggregator", "sparkwire.gateway", "sparkwire.client",
                           "sparkwire.replaylog.writer", "sparkwire.spark.sink", *HARNESS],
    # The protocol depends on nothing else of sparkwire: it owns the types it sends (protocol/items.py).
    "sparkwire.protocol": ["sparkwire.gateway", "sparkwire.client", "sparkwire.replaylog", "sparkwire.spark",
                           "redis", "starlette", "websockets", *HARNESS],
    "sparkwire.replaylog": ["sparkwire.gateway", "sparkwire.client", "sparkwire.aggregator", *HARNESS],
    # The gateway reaches its store through the log port (replaylog/port.py): every Redis command lives in
    # replaylog, so the gateway runs on the in-memory store in tests as it runs on Redis in pods.
    "sparkwire.gateway": ["redis", "sparkwire.client", "sparkwire.spark", "sparkwire.replaylog.reader",
                          "sparkwire.replaylog.async_reader", "sparkwire.replaylog.writer", *HARNESS],
    "sparkwire.producer": [*HARNESS],
    # The independent oracle: it reads the log and computes the expected results itself.
    "sparkwire_harness.verify": ["sparkwire_harness.stack", "sparkwire.gateway", "sparkwire.aggregator",
                                 "sparkwire.spark"],
}


def package_dir(package: str) -> Path:
    top, *rest = package.split(".")
    return PACKAGE_DIRS[top].joinpath(*rest)


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def offending_imports(folder: Path, forbidden: list[str]) -> set[tuple[str, str]]:
    return {
        (path.relative_to(folder).as_posix(), module)
        for path in folder.rglob("*.py")
        for module in imported_modules(path)
        if any(module == name or module.startswith(name + ".") for name in forbidden)
    }


@pytest.mark.parametrize(("package", "forbidden"), sorted(FORBIDDEN.items()))
def test_a_package_imports_nothing_it_must_not(package: str, forbidden: list[str]) -> None:
    folder = package_dir(package)
    assert (folder / "__init__.py").is_file(), f"{package}: no package at {folder}"
    assert not offending_imports(folder, forbidden)


def test_the_product_never_imports_the_harness() -> None:
    assert offending_imports(PACKAGE_DIRS["sparkwire"], HARNESS) == set()  # chaos: sparkwire-harness


def test_the_folder_tree_shows_the_import_names() -> None:
    """No mapping of a folder to another name (mypy and other tools then need none either)."""
    for package, folder in PACKAGE_DIRS.items():
        assert folder.name == package and (folder / "__init__.py").is_file()


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
