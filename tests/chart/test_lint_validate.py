"""helm lint --strict and strict schema validation of every rendered object with kubectl-validate: native
kinds against the built-in OpenAPI schemas of a Kubernetes version, SparkApplication / ServiceMonitor /
PrometheusRule / HTTPRoute against the operators' and Gateway API's CRDs in .cache/k8s/crds — all offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import (
    CHART,
    CI_VALUES,
    KUBE_VERSION,
    MIN_KUBE_VERSION,
    Obj,
    crds_dir,
    render,
    tool,
)

VALUES_CASES = [pytest.param(None, id="defaults")] + [pytest.param(p, id=p.stem) for p in CI_VALUES]


def test_ci_values_cover_the_required_scenarios() -> None:
    names = {p.name for p in CI_VALUES}
    assert {"default-values.yaml", "external-redis-values.yaml", "kind-values.yaml", "hpa-pdb-values.yaml",
            "auth-ingress-values.yaml", "replicated-values.yaml"} <= names


@pytest.mark.parametrize("values", VALUES_CASES)
def test_helm_lint_strict(values: Path | None) -> None:
    command = [str(tool("helm")), "lint", "--strict", str(CHART)]
    if values is not None:
        command += ["--values", str(values)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


def _with_spark_pod_templates(objects: list[Obj]) -> list[Obj]:
    """The SparkApplication CRD keeps driver/executor ``template`` as free-form objects
    (x-kubernetes-preserve-unknown-fields), so each one is also validated as a native v1 PodTemplate."""
    out = list(objects)
    for obj in objects:
        if obj["kind"] == "SparkApplication":
            for role in ("driver", "executor"):
                out.append({"apiVersion": "v1", "kind": "PodTemplate",
                            "metadata": {"name": f"{obj['metadata']['name']}-{role}"},
                            "template": obj["spec"][role]["template"]})
    return out


def _kubectl_validate(objects: list[Obj], directory: Path, version: str) -> dict[str, list[Obj]]:
    """One file per object (kubectl-validate reports per file); returns {file: [failures]}."""
    objects = _with_spark_pod_templates(objects)
    directory.mkdir(parents=True, exist_ok=True)
    for index, obj in enumerate(objects):
        name = f"{index:03d}-{obj['kind']}-{obj['metadata']['name']}.yaml"
        (directory / name).write_text(yaml.safe_dump(obj, sort_keys=False))
    result = subprocess.run(
        [str(tool("kubectl-validate")), str(directory), "--version", version,
         "--local-crds", str(crds_dir()), "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    try:
        report: dict[str, list[Obj]] = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"kubectl-validate gave no JSON report:\n{result.stdout}\n{result.stderr}") from None
    assert len(report) == len(objects), f"validated {len(report)} of {len(objects)} objects"
    return {path: [s for s in statuses if s.get("status") != "Success"] for path, statuses in report.items()}


def _failures(report: dict[str, list[Obj]]) -> str:
    return "\n".join(f"{Path(path).name}: {s.get('message')}" for path, statuses in report.items() for s in statuses)


@pytest.mark.parametrize("values", VALUES_CASES)
def test_every_object_validates_strictly(values: Path | None, tmp_path: Path) -> None:
    objects = render([values] if values else [])
    report = _kubectl_validate(objects, tmp_path, KUBE_VERSION)
    assert not _failures(report), _failures(report)


def test_oldest_supported_kubernetes_validates(tmp_path: Path) -> None:
    """At the chart's kubeVersion floor the preStop hook is an exec sleep (the sleep action is 1.30+)."""
    objects = render([CHART / "ci" / "kind-values.yaml"], kube_version=MIN_KUBE_VERSION)
    report = _kubectl_validate(objects, tmp_path, MIN_KUBE_VERSION)
    assert not _failures(report), _failures(report)


@pytest.mark.parametrize(("kind", "path", "bogus"), [
    ("Deployment", ("spec", "template", "spec", "containers", 0), "bogusField"),
    ("SparkApplication", ("spec", "driver"), "bogusField"),
    ("SparkApplication", ("spec", "restartPolicy"), "onFailureRetryIntervalSeconds"),
    ("SparkApplication", ("spec", "executor", "template", "spec", "containers", 0), "volumeMount"),
    ("PrometheusRule", ("spec", "groups", 0), "bogusField"),
    ("ServiceMonitor", ("spec", "endpoints", 0), "bogusField"),
])
def test_the_validation_is_strict_for_native_kinds_and_crds(
        kind: str, path: tuple[str | int, ...], bogus: str, tmp_path: Path) -> None:
    """A misspelt field fails: the check would catch a chart typo, including in the CRD kinds."""
    objects = [o for o in render([CHART / "ci" / "observability-values.yaml"]) if o["kind"] == kind][:1]
    assert objects, f"no {kind} rendered"
    node: object = objects[0]
    for step in path:
        node = node[step]  # type: ignore[index]
    node[bogus] = 1  # type: ignore[index]
    report = _kubectl_validate(objects, tmp_path, KUBE_VERSION)
    assert bogus in _failures(report), f"kubectl-validate accepted {kind} with {bogus}: {report}"


def test_a_missing_tool_fails_with_the_setup_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from . import conftest

    monkeypatch.setattr(conftest, "K8S", tmp_path)
    monkeypatch.setattr(conftest, "CRDS", tmp_path / "crds")
    with pytest.raises(pytest.fail.Exception, match=r"helm not found at .*: run `make setup`"):
        conftest.tool("helm")
    with pytest.raises(pytest.fail.Exception, match=r"no CRDs in .*: run `make setup`"):
        conftest.crds_dir()
