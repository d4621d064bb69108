"""The kind e2e setup, checked without Docker: kind-config.yaml against kind v0.30.0's own config types
(from its Go module, when present in the module cache), the node image kind v0.30.0 was released with,
and the shell scripts' syntax."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, load_yaml

KIND_DIR = REPO / "tests" / "e2e" / "kind"
KIND_CONFIG = KIND_DIR / "kind-config.yaml"
SCRIPTS = [REPO / "spark-operator" / "install.sh", KIND_DIR / "up.sh", KIND_DIR / "down.sh"]


def kind_version() -> str:
    match = re.search(r"^KIND_VERSION=(v[\d.]+)$", (KIND_DIR / "up.sh").read_text(), re.MULTILINE)
    assert match, "KIND_VERSION missing from up.sh"
    return match.group(1)


def kind_module() -> Path:
    cache = None
    if shutil.which("go"):
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60).stdout.strip()
    root = Path(cache or os.path.join(os.path.expanduser("~"), "go", "pkg", "mod"))
    module = root / "sigs.k8s.io" / f"kind@{kind_version()}"
    if not module.is_dir():
        pytest.skip(f"kind {kind_version()} is not in the Go module cache ({module}); up.sh installs it")
    return module


def yaml_fields(types_go: str, struct: str) -> set[str]:
    """The yaml names of a Go struct's fields (``yaml:"name,omitempty"``), inline members excluded."""
    body = re.search(rf"^type {struct} struct \{{(.*?)^\}}", types_go, re.MULTILINE | re.DOTALL)
    assert body, struct
    return {name for name in re.findall(r'yaml:"([^",]*)', body.group(1)) if name}


def test_kind_config_uses_only_fields_kind_knows() -> None:
    types_go = (kind_module() / "pkg" / "apis" / "config" / "v1alpha4" / "types.go").read_text()
    config: dict[str, Any] = load_yaml(KIND_CONFIG)
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
    images = {node["image"] for node in load_yaml(KIND_CONFIG)["nodes"]}
    assert images == {match.group(1)}


def test_cluster_shape_for_the_tests() -> None:
    config = load_yaml(KIND_CONFIG)
    roles = [node["role"] for node in config["nodes"]]
    assert roles == ["control-plane", "worker", "worker"]
    [control] = [n for n in config["nodes"] if n["role"] == "control-plane"]
    assert control["labels"] == {"ingress-ready": "true"}, "ingress-nginx's kind manifest selects this label"
    ports = {m["containerPort"]: (m["listenAddress"], m["hostPort"]) for m in control["extraPortMappings"]}
    assert ports[80] == ("127.0.0.1", 18080)
    conftest = (KIND_DIR / "conftest.py").read_text()
    assert '"http://127.0.0.1:18080"' in conftest, "the tests' default ingress address is the mapped port"
    assert config["name"] == "sparkwire" and 'CONTEXT = os.environ.get("SPARKWIRE_KIND_CONTEXT", "kind-sparkwire")' \
        in conftest
    assert "kind-sparkwire" in (REPO / "skaffold.yaml").read_text()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_parse_and_are_strict(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert os.access(script, os.X_OK), f"{script} is not executable"
    if shutil.which("shellcheck"):
        checked = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout
