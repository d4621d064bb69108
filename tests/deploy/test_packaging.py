"""What a team adopting sparkwire reads before installing it: one licence (Apache-2.0) declared by every
manifest, one version, extras by role with ranges (the exact pins in constraints.txt), dev tools in dependency
groups. The build itself (sdist, wheel, each extra in a fresh venv) is `make check-packages`."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

import sparkwire

from .conftest import CHART, REPO, load_yaml, pyspark_pin

NPM_PACKAGE = REPO / "services" / "sparkwire" / "client" / "js" / "package.json"


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, _, version = line.split("#", 1)[0].partition("==")
        if version:
            pins[re.sub(r"[-_.]+", "-", name.strip()).lower()] = version.strip()
    return pins


def test_the_licence_is_apache_2_and_every_manifest_declares_it() -> None:
    assert "Apache License" in (REPO / "LICENSE").read_text() and "Version 2.0" in (REPO / "LICENSE").read_text()
    notice = (REPO / "NOTICE").read_text()
    assert "uPlot" in notice and "uPlot.LICENSE" in notice  # the vendored library keeps its own (MIT)
    assert (REPO / "services/sparkwire/gateway/static/vendor/uPlot.LICENSE").is_file()
    project = pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert {"LICENSE", "NOTICE"} <= set(project["license-files"])
    assert tomllib.loads((REPO / "harness" / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    assert json.loads(NPM_PACKAGE.read_text())["license"] == "Apache-2.0"
    assert load_yaml(CHART / "Chart.yaml")["annotations"]["artifacthub.io/license"] == "Apache-2.0"


def test_one_version_source() -> None:
    """The package's version is sparkwire.__version__ (pyproject reads it); the chart's appVersion, its
    Artifact Hub images and the npm client follow it."""
    project = pyproject()
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "sparkwire.__version__"}
    version = sparkwire.__version__
    chart = load_yaml(CHART / "Chart.yaml")
    assert chart["appVersion"] == version
    assert json.loads(NPM_PACKAGE.read_text())["version"] == version
    images = [line.split(":")[-1] for line in chart["annotations"]["artifacthub.io/images"].splitlines()
              if "image:" in line]
    assert images and all(tag == version for tag in images)


def test_extras_by_role_are_ranges_that_admit_the_pinned_versions() -> None:
    extras = pyproject()["project"]["optional-dependencies"]
    assert set(extras) == {"client", "gateway", "spark", "server"}
    assert extras["server"] == ["sparkwire[client,gateway,spark]"]
    pins = constraints()
    for extra in ("client", "gateway", "spark"):
        for text in extras[extra]:
            requirement = Requirement(text)
            assert not any(s.operator in ("==", "===") for s in requirement.specifier), f"{extra}: {text} is a pin"
            assert requirement.specifier, f"{extra}: {text} has no range"
            name = re.sub(r"[-_.]+", "-", requirement.name).lower()
            assert name in pins, f"{name} is not pinned in constraints.txt"
            assert requirement.specifier.contains(pins[name]), f"{text} excludes constraints.txt's {pins[name]}"
    client = {Requirement(r).name for r in extras["client"]}
    assert client.isdisjoint({"pyspark", "redis", "starlette", "uvicorn", "confluent-kafka"})
    spark = next(Requirement(r) for r in extras["spark"] if Requirement(r).name == "pyspark")
    assert spark.specifier.contains(pyspark_pin()), "the Spark every test runs"
    assert all(spark.specifier.contains(v) for v in ("4.2.0", "4.2.1", "4.9.0"))
    assert not any(spark.specifier.contains(v) for v in ("3.5.5", "4.1.1", "5.0.0"))  # 4.1.x: README


def test_dev_tools_are_dependency_groups_not_extras() -> None:
    groups = pyproject()["dependency-groups"]
    tools = {Requirement(r).name for group in groups.values() for r in group if isinstance(r, str)}
    assert {"pytest", "mypy", "ruff", "build", "twine"} <= tools
    assert {"include-group": "test"} in groups["dev"]
    setup = (REPO / "infra" / "setup.sh").read_text()
    assert "--group dev" in setup and "-c constraints.txt" in setup
    pins = constraints()
    for name in tools:
        assert re.sub(r"[-_.]+", "-", name).lower() in pins, f"{name} is not pinned in constraints.txt"


def test_the_package_is_typed_and_describes_itself() -> None:
    project = pyproject()
    assert (REPO / "services" / "sparkwire" / "py.typed").is_file()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["sparkwire"]
    meta = project["project"]
    assert meta["readme"] == "README.md" and "Typing :: Typed" in meta["classifiers"]
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(meta["urls"])
    assert Version(sparkwire.__version__)
