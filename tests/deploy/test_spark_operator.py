"""spark-operator/: the operator chart (2.5.0, from its Go module: no network) rendered the way install.sh
installs it, with our values.yaml — keys that exist in the chart, webhook on, the job namespace the
sparkwire release uses everywhere it matters."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    HELM,
    OPERATOR_VERSION,
    REPO,
    SKAFFOLD,
    assert_kubectl_validates,
    leaf_paths,
    load_all_yaml,
    load_yaml,
    require_helm,
    unavailable,
    value_at,
)

HERE = REPO / "spark-operator"
INSTALL = HERE / "install.sh"
VALUES = HERE / "values.yaml"
MODULE = f"github.com/kubeflow/spark-operator/v2@{OPERATOR_VERSION}"


def operator_chart() -> Path:
    """charts/spark-operator-chart of the operator's Go module, as infra/k8s-tools.sh downloads it."""
    cache = None
    if shutil.which("go"):
        done = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60)
        cache = done.stdout.strip() or None
    cache = cache or os.path.join(os.path.expanduser("~"), "go", "pkg", "mod")
    chart = Path(cache) / MODULE / "charts" / "spark-operator-chart"
    if not (chart / "Chart.yaml").is_file():
        unavailable(f"{MODULE} not in the Go module cache ({chart}): run `bash infra/k8s-tools.sh`")
    return chart


def install_sh_default(name: str) -> str:
    match = re.search(rf'^{name}="\$\{{[A-Z_]+:-([^}}]*)\}}"$', INSTALL.read_text(), re.MULTILINE)
    assert match, f"{name} default not found in install.sh"
    return match.group(1)


def install_sh_pin() -> str:
    match = re.search(r"^CHART_VERSION=(\S+)$", INSTALL.read_text(), re.MULTILINE)
    assert match
    return match.group(1)


def render(chart: Path, **env: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["bash", str(INSTALL), "--template"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "SPARK_OPERATOR_CHART": str(chart), "HELM": str(require_helm()), **env},
    )
    assert done.returncode == 0, done.stderr
    return load_all_yaml(done.stdout)


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render(operator_chart())


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def container_args(objects: list[dict[str, Any]], component: str) -> list[str]:
    [deployment] = [d for d in by_kind(objects, "Deployment")
                    if d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args: list[str] = container["args"]
    return args


def test_pins_agree() -> None:
    assert install_sh_pin() == OPERATOR_VERSION.removeprefix("v")
    assert "https://kubeflow.github.io/spark-operator" in INSTALL.read_text()
    # The CRDs the chart tests validate against come from the same module version.
    tools = re.search(r"^SPARK_OPERATOR_VERSION=(\S+)$", (REPO / "infra" / "k8s-tools.sh").read_text(), re.MULTILINE)
    assert tools and tools.group(1) == OPERATOR_VERSION


def test_every_value_we_set_exists_in_the_operator_chart() -> None:
    ours = load_yaml(VALUES)
    theirs = load_yaml(operator_chart() / "values.yaml")
    missing = [path for path in leaf_paths(ours) if not declared(theirs, path)]
    assert not missing, f"not values of spark-operator {OPERATOR_VERSION}: {missing}"


def declared(values: dict[str, Any], dotted: str) -> bool:
    """Whether the chart declares ``dotted``, or a free-form map above it (``resources: {}``)."""
    parts = dotted.split(".")
    for depth in range(len(parts), 0, -1):
        try:
            node = value_at(values, ".".join(parts[:depth]))
        except KeyError:
            continue
        return depth == len(parts) or node == {}
    return False


def test_a_misspelt_value_would_be_caught() -> None:
    theirs = load_yaml(operator_chart() / "values.yaml")
    assert declared(theirs, "webhook.enable") and declared(theirs, "controller.resources.limits.memory")
    assert not declared(theirs, "webhook.enabled") and not declared(theirs, "spark.jobNamespace")


def test_job_namespace_is_the_one_the_sparkwire_release_uses() -> None:
    namespace = install_sh_default("JOB_NAMESPACE")
    assert load_yaml(VALUES)["spark"]["jobNamespaces"] == [namespace]
    assert load_yaml(HERE / "namespace.yaml")["metadata"]["name"] == namespace
    [release] = load_yaml(SKAFFOLD)["deploy"]["helm"]["releases"]
    assert release["namespace"] == namespace
    kind_up = REPO / "infra" / "kind" / "kind-up.sh"
    assert f'NAMESPACE="${{SPARKWIRE_NAMESPACE:-{namespace}}}"' in kind_up.read_text()


def test_webhook_is_enabled_and_scoped_to_the_job_namespace(objects: list[dict[str, Any]]) -> None:
    assert load_yaml(VALUES)["webhook"]["enable"] is True
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        [config] = by_kind(objects, kind)
        assert config["webhooks"], kind
        for webhook in config["webhooks"]:
            [expression] = webhook["namespaceSelector"]["matchExpressions"]
            assert expression == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["sparkwire"]}
            assert webhook["failurePolicy"] == "Fail"
    mutate = by_kind(objects, "MutatingWebhookConfiguration")[0]["webhooks"]
    assert any(w["rules"][0]["resources"] == ["pods"] for w in mutate), "driver/executor pods are patched"
    assert "--namespaces=sparkwire" in container_args(objects, "webhook")


def test_controller_watches_only_the_job_namespace_with_its_roles_there(objects: list[dict[str, Any]]) -> None:
    assert "--namespaces=sparkwire" in container_args(objects, "controller")
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in by_kind(objects, "Role")}
    assert ("sparkwire", "spark-operator-controller") in roles
    assert ("sparkwire", "spark-operator-webhook") in roles


def test_no_operator_made_service_account_for_spark(objects: list[dict[str, Any]]) -> None:
    """The sparkwire chart owns the driver's ServiceAccount and Role."""
    in_job_namespace = [(o["kind"], o["metadata"]["name"]) for o in objects
                        if o["metadata"].get("namespace") == "sparkwire"]
    assert ("ServiceAccount", "spark-operator-spark") not in in_job_namespace
    assert all(name != "spark-operator-spark" for _, name in in_job_namespace), in_job_namespace


def test_resources_and_metrics(objects: list[dict[str, Any]]) -> None:
    ours = load_yaml(VALUES)
    for component in ("controller", "webhook"):
        [deployment] = [d for d in by_kind(objects, "Deployment")
                        if d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["resources"] == ours[component]["resources"], component
    controller = next(d for d in by_kind(objects, "Deployment")
                      if d["metadata"]["labels"].get("app.kubernetes.io/component") == "controller")
    annotations = controller["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "8080"


def test_another_namespace_is_applied_everywhere() -> None:
    objects = render(operator_chart(), SPARKWIRE_NAMESPACE="other-ns")
    assert "--namespaces=other-ns" in container_args(objects, "controller")
    assert "--namespaces=other-ns" in container_args(objects, "webhook")
    rendered = str(objects)
    assert "'sparkwire'" not in rendered and "=sparkwire" not in rendered


def test_install_refuses_a_local_chart_of_another_version(tmp_path: Path) -> None:
    fake = tmp_path / "chart"
    fake.mkdir()
    (fake / "Chart.yaml").write_text("apiVersion: v2\nname: spark-operator\nversion: 2.4.0\n")
    done = subprocess.run(["bash", str(INSTALL), "--template"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SPARK_OPERATOR_CHART": str(fake), "HELM": str(HELM)})
    assert done.returncode != 0 and "pinned to 2.5.0" in done.stderr


def test_rendered_manifests_pass_kubectl_validate(objects: list[dict[str, Any]], tmp_path: Path) -> None:
    assert_kubectl_validates(objects, tmp_path)
