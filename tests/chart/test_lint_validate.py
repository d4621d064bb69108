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


STRICTNESS_CASES = [
    ("Deployment", ("spec", "template", "spec", "containers", 0), "bogusField"),
    ("SparkApplication", ("spec", "driver"), "bogusField"),
    ("SparkApplication", ("spec", "restartPolicy"), "onFailureRetryIntervalSeconds"),
    ("SparkApplication", ("spec", "executor", "template", "spec", "containers", 0), "volumeMount"),
    ("PrometheusRule", ("spec", "groups", 0), "bogusField"),
    ("ServiceMonitor", ("spec", "endpoints", 0), "bogusField"),
]


def _with_a_misspelt_field(kind: str, path: tuple[str | int, ...], bogus: str) -> list[Obj]:
    objects = [o for o in render([CHART / "ci" / "observability-values.yaml"]) if o["kind"] == kind][:1]
    assert objects, f"no {kind} rendered"
    node: object = objects[0]
    for step in path:
        node = node[step]  # type: ignore[index]
    node[bogus] = 1  # type: ignore[index]
    return objects


def _kubectl_validate(cases: dict[str, list[Obj]], directory: Path, version: str) -> dict[str, dict[str, list[Obj]]]:
    """Every case's objects in one kubectl-validate run (most of its ~10 s is loading the schemas, the same
    for every case), one file per object (it reports per file); returns {case: {file: [failures]}}."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for case, objects in cases.items():
        for index, obj in enumerate(_with_spark_pod_templates(objects)):
            name = f"{case}--{index:03d}-{obj['kind']}-{obj['metadata']['name']}.yaml"
            (directory / name).write_text(yaml.safe_dump(obj, sort_keys=False))
            files[name] = case
    result = subprocess.run(
        [str(tool("kubectl-validate")), str(directory), "--version", version,
         "--local-crds", str(crds_dir()), "--output", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    try:
        report: dict[str, list[Obj]] = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"kubectl-validate gave no JSON report:\n{result.stdout}\n{result.stderr}") from None
    assert sorted(Path(path).name for path in report) == sorted(files), "kubectl-validate skipped some objects"
    by_case: dict[str, dict[str, list[Obj]]] = {case: {} for case in cases}
    for path, statuses in report.items():
        by_case[files[Path(path).name]][path] = [s for s in statuses if s.get("status") != "Success"]
    return by_case


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[Obj]]]:
    """kubectl-validate's findings for every case of this module: two runs (the current Kubernetes version
    and the chart's floor) instead of one a case."""
    current: dict[str, list[Obj]] = {
        f"values-{case.id}": render([case.values[0]] if case.values[0] else []) for case in VALUES_CASES}
    for number, (kind, path, bogus) in enumerate(STRICTNESS_CASES):
        current[f"strict-{number}"] = _with_a_misspelt_field(kind, path, bogus)
    oldest = {"oldest": render([CHART / "ci" / "kind-values.yaml"], kube_version=MIN_KUBE_VERSION)}
    found = _kubectl_validate(current, tmp_path_factory.mktemp("validate-current"), KUBE_VERSION)
    found.update(_kubectl_validate(oldest, tmp_path_factory.mktemp("validate-oldest"), MIN_KUBE_VERSION))
    return found


def _failures(report: dict[str, list[Obj]]) -> str:
    return "\n".join(f"{Path(path).name}: {s.get('message')}" for path, statuses in report.items() for s in statuses)


@pytest.mark.parametrize("values", VALUES_CASES)
def test_every_object_validates_strictly(values: Path | None, reports: dict[str, dict[str, list[Obj]]],
                                         request: pytest.FixtureRequest) -> None:
    report = reports[f"values-{request.node.callspec.id}"]
    assert report, "no object validated"
    assert not _failures(report), _failures(report)


def test_oldest_supported_kubernetes_validates(reports: dict[str, dict[str, list[Obj]]]) -> None:
    """At the chart's kubeVersion floor the preStop hook is an exec sleep (the sleep action is 1.30+)."""
    assert reports["oldest"], "no object validated"
    assert not _failures(reports["oldest"]), _failures(reports["oldest"])


@pytest.mark.parametrize("number", range(len(STRICTNESS_CASES)),
                         ids=[f"{kind}-{bogus}" for kind, _, bogus in STRICTNESS_CASES])
def test_the_validation_is_strict_for_native_kinds_and_crds(number: int,
                                                           reports: dict[str, dict[str, list[Obj]]]) -> None:
    """A misspelt field fails: the check would catch a chart typo, including in the CRD kinds."""
    kind, _, bogus = STRICTNESS_CASES[number]
    report = reports[f"strict-{number}"]
    assert bogus in _failures(report), f"kubectl-validate accepted {kind} with {bogus}: {report}"


def test_a_missing_tool_fails_with_the_setup_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from . import conftest

    monkeypatch.setattr(conftest, "K8S", tmp_path)
    monkeypatch.setattr(conftest, "CRDS", tmp_path / "crds")
    with pytest.raises(pytest.fail.Exception, match=r"helm not found at .*: run `make setup`"):
        conftest.tool("helm")
    with pytest.raises(pytest.fail.Exception, match=r"no CRDs in .*: run `make setup`"):
        conftest.crds_dir()
