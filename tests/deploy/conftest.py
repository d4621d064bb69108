"""Static checks of the deployment files (images, skaffold.yaml, spark-operator/): no Docker engine and no
cluster needed. Tools and schemas come from ``bash infra/k8s-tools.sh`` (``.cache/k8s``); a check whose
tool or input is missing is skipped with the reason, never passed silently, and fails instead when ``CI`` is
set (``unavailable``)."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from sparkwire.paths import cache_dir

REPO = Path(__file__).resolve().parents[2]
K8S_CACHE = cache_dir() / "k8s"  # $SPARKWIRE_CACHE (as .ci/run sets), else the checkout's .cache
HELM = K8S_CACHE / "bin" / "helm"
KUBECTL_VALIDATE = K8S_CACHE / "bin" / "kubectl-validate"
CRDS = K8S_CACHE / "crds"
CHART = REPO / "charts" / "sparkwire"
SKAFFOLD = REPO / "skaffold.yaml"
OPERATOR_VERSION = "v2.5.0"


# CI (.ci/run sets CI=true, as most CI systems do) runs `make setup`, which provides every tool and input these
# checks need (infra/k8s-tools.sh: helm, kubectl-validate, the CRDs, the skaffold schema, the spark-operator
# module; the Spark jars; shellcheck): there a missing one is a broken setup, not a check to skip.
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skip with ``reason``; when ``CI`` is set, fail with it (as SPARKWIRE_KIND_REQUIRED does for the kind suite)."""
    if IN_CI:
        pytest.fail(f"{reason} [CI is set: make setup provides it there, so the check fails instead of skipping]",
                    pytrace=False)
    pytest.skip(reason)


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_all_yaml(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def pyspark_pin() -> str:
    """The pyspark every test and image runs: constraints.txt's pin (pyproject.toml's spark extra is a range)."""
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, _, version = line.split("#", 1)[0].partition("==")
        if name.strip().lower() == "pyspark":
            return version.strip()
    raise AssertionError("pyspark is not pinned in constraints.txt")


def pom_spark_version() -> str:
    root = ET.parse(REPO / "infra" / "maven" / "spark-kafka" / "pom.xml").getroot()
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = root.find("m:properties/m:spark.version", ns)
    assert node is not None and node.text, "spark.version missing from infra/maven/spark-kafka/pom.xml"
    return node.text.strip()


def require_helm() -> Path:
    if not HELM.is_file():
        unavailable(f"helm not found at {HELM}: run `bash infra/k8s-tools.sh`")
    return HELM


def require_chart() -> Path:
    if not (CHART / "Chart.yaml").is_file():
        unavailable(f"the sparkwire chart is not there ({CHART})")
    return CHART


def helm_template(chart: Path, *, release: str, namespace: str, values_files: Sequence[Path] = (),
                  set_values: Mapping[str, str] | None = None, extra: Sequence[str] = ()) -> list[dict[str, Any]]:
    """``helm template`` the chart and return its objects."""
    command = [str(require_helm()), "template", release, str(chart), "--namespace", namespace]
    for values in values_files:
        command += ["--values", str(values)]
    for key, value in (set_values or {}).items():
        command += ["--set", f"{key}={value}"]
    command += list(extra)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
    return load_all_yaml(done.stdout)


def assert_kubectl_validates(objects: Sequence[Mapping[str, Any]], tmp_path: Path, *, version: str = "1.33") -> None:
    """Validate objects with kubectl-validate (native schemas offline, CRDs from .cache/k8s/crds)."""
    if not KUBECTL_VALIDATE.is_file():
        unavailable(f"kubectl-validate not found at {KUBECTL_VALIDATE}: run `bash infra/k8s-tools.sh`")
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(list(objects), sort_keys=False))
    command = [str(KUBECTL_VALIDATE), str(manifest), "--version", version]
    if CRDS.is_dir() and any(CRDS.glob("*.yaml")):
        command += ["--local-crds", str(CRDS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}\n{done.stderr}"


def value_at(values: Mapping[str, Any], dotted: str) -> Any:
    """``values["a"]["b"]`` for ``"a.b"``; KeyError naming the first missing part."""
    node: Any = values
    walked = []
    for part in dotted.split("."):
        walked.append(part)
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(".".join(walked))
        node = node[part]
    return node


def leaf_paths(values: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of the leaves of a values tree (a list counts as a leaf)."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from leaf_paths(value, path + ".")
        else:
            yield path


def json_dump(value: object) -> str:
    return json.dumps(value, indent=1, sort_keys=True)[:2000]
