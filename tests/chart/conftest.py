"""Offline checks of the Helm chart ``charts/sparkwire``: render it with the pinned helm and look at the
objects. The tools come from ``make setup`` (``infra/k8s-tools.sh``) under ``.cache/k8s``."""

from __future__ import annotations

import base64
import functools
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkwire.paths import cache_dir, repo_root

CHART = repo_root() / "charts" / "sparkwire"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
K8S = cache_dir() / "k8s"
CRDS = K8S / "crds"
RELEASE = "sw"
NAMESPACE = "streaming"
# Rendered and validated for a current cluster; MIN_KUBE_VERSION is Chart.yaml's kubeVersion floor.
KUBE_VERSION = "1.33"
MIN_KUBE_VERSION = "1.27"
FULLNAME = f"{RELEASE}-sparkwire"

Obj = dict[str, Any]


def tool(name: str) -> Path:
    """A binary from ``.cache/k8s/bin``; fails (not skips) when setup has not provided it."""
    path = K8S / "bin" / name
    if not path.is_file():
        pytest.fail(f"{name} not found at {path}: run `make setup` (infra/k8s-tools.sh builds it)", pytrace=False)
    return path


def crds_dir() -> Path:
    if not any(CRDS.glob("*.yaml")):
        pytest.fail(f"no CRDs in {CRDS}: run `make setup` (infra/k8s-tools.sh fetches them)", pytrace=False)
    return CRDS


def _helm_template(values_files: tuple[str, ...], sets: tuple[tuple[str, str], ...],
                   kube_version: str) -> subprocess.CompletedProcess[str]:
    command = [str(tool("helm")), "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
               "--kube-version", kube_version]
    for values in values_files:
        command += ["--values", values]
    for key, value in sets:
        command += ["--set-json", f"{key}={value}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _as_args(values: Iterable[str | Path], sets: Mapping[str, Any] | None) -> tuple[
        tuple[str, ...], tuple[tuple[str, str], ...]]:
    import json

    files = tuple(str(v) for v in values)
    pairs = tuple(sorted((k, json.dumps(v)) for k, v in (sets or {}).items()))
    return files, pairs


@functools.cache
def _render_cached(files: tuple[str, ...], pairs: tuple[tuple[str, str], ...], kube_version: str) -> str:
    result = _helm_template(files, pairs, kube_version)
    if result.returncode != 0:
        raise AssertionError(f"helm template failed:\n{result.stderr}")
    return result.stdout


def render_text(values: Iterable[str | Path] = (), sets: Mapping[str, Any] | None = None,
                kube_version: str = KUBE_VERSION) -> str:
    files, pairs = _as_args(values, sets)
    return _render_cached(files, pairs, kube_version)


def render(values: Iterable[str | Path] = (), sets: Mapping[str, Any] | None = None,
           kube_version: str = KUBE_VERSION) -> list[Obj]:
    """The chart's objects for these values files and ``--set-json`` pairs (``{"a.b": value}``)."""
    return [doc for doc in yaml.safe_load_all(render_text(values, sets, kube_version)) if doc]


def render_error(values: Iterable[str | Path] = (), sets: Mapping[str, Any] | None = None) -> str:
    """helm's error output for values the chart must refuse."""
    files, pairs = _as_args(values, sets)
    result = _helm_template(files, pairs, KUBE_VERSION)
    assert result.returncode != 0, "expected the chart to refuse these values, it rendered"
    return result.stderr


def kinds(objects: list[Obj]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj["metadata"]["name"])
    return out


def find(objects: list[Obj], kind: str, name: str | None = None) -> Obj:
    matches = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in matches]}"
    return matches[0]


def has(objects: list[Obj], kind: str, name: str | None = None) -> bool:
    return any(o["kind"] == kind and (name is None or o["metadata"]["name"] == name) for o in objects)


def pod_specs(objects: list[Obj]) -> Iterator[tuple[str, Obj]]:
    """Every pod spec the chart defines, labelled: workloads, Jobs and the SparkApplication's driver and
    executor pod templates."""
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
            yield f"{kind}/{name}", obj["spec"]["template"]["spec"]
        elif kind == "SparkApplication":
            for role in ("driver", "executor"):
                yield f"{kind}/{name}/{role}", obj["spec"][role]["template"]["spec"]


def env_of(container: Obj) -> dict[str, Obj]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.fixture(scope="session")
def default_objects() -> list[Obj]:
    return render()


def gateway_container(objects: list[Obj]) -> Obj:
    containers: list[Obj] = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "gateway")


def resolved_env(objects: list[Obj], secrets: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """The gateway container's SPARKWIRE_* variables as the kubelet would give them: literal values, and
    secretKeyRefs read from the rendered Secrets (or ``secrets``, standing in for existing ones)."""
    known = {o["metadata"]["name"]: {k: base64.b64decode(v).decode() for k, v in o.get("data", {}).items()}
             for o in objects if o["kind"] == "Secret"}
    known.update(secrets or {})
    env: dict[str, str] = {}
    for name, entry in env_of(gateway_container(objects)).items():
        if not name.startswith("SPARKWIRE_"):
            continue
        if "value" in entry:
            env[name] = entry["value"]
        elif "secretKeyRef" in entry.get("valueFrom", {}):
            ref = entry["valueFrom"]["secretKeyRef"]
            env[name] = known[ref["name"]][ref["key"]]
    return env
