"""Which part of the package may import which: the clients speak the protocol, not the gateway's
internals; the gateway's rooms depend one way; the Spark job runs in an image without the local stack; the
protocol does no I/O; the public Spark API and its examples know no built-in job; the built-in job and the
examples use only what ``sparkwire.spark`` exports."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Each top-level package's folder: the product under services/, the test harness beside it.
PACKAGE_DIRS = {"sparkwire": ROOT / "services" / "sparkwire",
                "sparkwire_harness": ROOT / "harness" / "sparkwire_harness"}
HARNESS = ["sparkwire_harness"]
GATEWAY_POD = ("pod", "app", "server")
GATEWAY_ROOMS = ("recovery", "transport", "fanout", "connection", "store", "http", "auth", *GATEWAY_POD)

FORBIDDEN = {
    "sparkwire.client": ["sparkwire.gateway", "sparkwire.replaylog", "sparkwire.spark", "redis", *HARNESS],
    "sparkwire.aggregator": ["sparkwire.gateway", "sparkwire.client", *HARNESS],
    # The public Spark API knows no job of its own; examples use nothing but it (as a team's job would).
    "sparkwire.spark": ["sparkwire.aggregator", "sparkwire.examples", "sparkwire.gateway", "sparkwire.client",
                        *HARNESS],
    "sparkwire.examples": ["sparkwire.aggregator", "sparkwire.gateway", "sparkwire.client",
                           "sparkwire.replaylog.writer", "sparkwire.spark.delivery.sink", *HARNESS],
    # The protocol depends on nothing else of sparkwire: it owns the types it sends (protocol/items.py).
    "sparkwire.protocol": ["sparkwire.gateway", "sparkwire.client", "sparkwire.replaylog", "sparkwire.spark",
                           "redis", "starlette", "websockets", *HARNESS],
    "sparkwire.replaylog": ["sparkwire.gateway", "sparkwire.client", "sparkwire.aggregator", *HARNESS],
    # The gateway reaches its store through the log port (replaylog/port.py): every Redis command lives in
    # replaylog, so the gateway runs on the in-memory store in tests as it runs on Redis in pods.
    "sparkwire.gateway": ["redis", "sparkwire.client", "sparkwire.spark", "sparkwire.replaylog.reader",
                          "sparkwire.replaylog.async_reader", "sparkwire.replaylog.writer", *HARNESS],
    # The gateway's rooms, bottom up: the pure recovery decisions; the sockets (transport), which know nothing of
    # what a connection does with them (the pod hands their endpoints its decisions); the fan-out; a connection;
    # the HTTP reads beside them. Only the pod (pod.py, app.py, server.py) puts them together.
    "sparkwire.gateway.recovery": [*(f"sparkwire.gateway.{room}" for room in GATEWAY_ROOMS if room != "recovery"),
                                   "asyncio", "starlette", "uvicorn", "websockets", "redis", "prometheus_client"],
    "sparkwire.gateway.transport": [*(f"sparkwire.gateway.{room}" for room in GATEWAY_ROOMS if room != "transport")],
    "sparkwire.gateway.fanout": [*(f"sparkwire.gateway.{room}" for room in ("connection", "http", *GATEWAY_POD))],
    "sparkwire.gateway.connection": [*(f"sparkwire.gateway.{room}" for room in ("http", *GATEWAY_POD))],
    "sparkwire.gateway.http": [*(f"sparkwire.gateway.{room}" for room in ("connection", "transport", *GATEWAY_POD))],
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



def test_a_gateway_room_rule_finds_an_upward_import(tmp_path: Path) -> None:
    (tmp_path / "sse.py").write_text("from sparkwire.gateway.connection.lifecycle import Connection\n"
                                     "from sparkwire.gateway.transport.contract import FrameSocket\n")
    assert offending_imports(tmp_path, FORBIDDEN["sparkwire.gateway.transport"]) == {
        ("sse.py", "sparkwire.gateway.connection.lifecycle")}

# The public Spark API is a boundary: the built-in job and the examples import only the names
# ``sparkwire.spark`` exports (its ``__all__``), never one of its modules, as a team's own job would.
PUBLIC_SPARK_ONLY = ["sparkwire.aggregator", "sparkwire.examples"]


def spark_exports() -> set[str]:
    """``sparkwire.spark.__all__``, read from its source (importing it is not needed to know it)."""
    for node in ast.parse((package_dir("sparkwire.spark") / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("sparkwire/spark/__init__.py has no __all__")


def private_spark_imports(path: Path, exported: set[str]) -> set[str]:
    """What ``path`` imports of ``sparkwire.spark`` beyond its exports: a module under it, or a name it does
    not export."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("sparkwire.spark."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("sparkwire.spark."):
                found.add(node.module)
            elif node.module == "sparkwire.spark":
                found.update(f"sparkwire.spark.{alias.name}" for alias in node.names if alias.name not in exported)
            elif node.module == "sparkwire":
                found.update(f"sparkwire.{alias.name}" for alias in node.names if alias.name == "spark")
    return found


@pytest.mark.parametrize("package", PUBLIC_SPARK_ONLY)
def test_the_built_in_job_and_the_examples_import_only_the_public_spark_api(package: str) -> None:
    folder, exported = package_dir(package), spark_exports()
    offending = {(path.relative_to(folder).as_posix(), name) for path in folder.rglob("*.py")
                 for name in private_spark_imports(path, exported)}
    assert not offending, f"{package} imports what sparkwire.spark does not export: {sorted(offending)}"


def test_the_public_spark_rule_finds_a_private_import(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text("from sparkwire.spark import Job, deliver\n"
                   "from sparkwire.spark import Rebuilder\n"
                   "import sparkwire.spark.runtime.main\n"
                   "from sparkwire.spark.delivery.sink import ReplayLogSink\n"
                   "def later():\n    from sparkwire.spark.rebuild.checkpoint import read_history\n")
    assert private_spark_imports(job, spark_exports()) == {
        "sparkwire.spark.Rebuilder", "sparkwire.spark.runtime.main", "sparkwire.spark.delivery.sink",
        "sparkwire.spark.rebuild.checkpoint"}


def test_every_name_the_public_spark_api_exports_is_there() -> None:
    spark = importlib.import_module("sparkwire.spark")
    assert set(spark.__all__) == spark_exports()
    assert [name for name in sorted(spark_exports()) if not hasattr(spark, name)] == []


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
