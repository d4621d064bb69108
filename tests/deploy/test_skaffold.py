"""skaffold.yaml: valid against skaffold's JSON schema, its artifacts and templates consistent with the
Dockerfiles and the chart's values (so `skaffold run` sets values that exist and the images land where
the chart reads them)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft7Validator

from .conftest import (
    CHART,
    K8S_CACHE,
    REPO,
    SKAFFOLD,
    helm_template,
    load_yaml,
    require_chart,
    unavailable,
    value_at,
)

API_VERSION = "skaffold/v4beta14"
SCHEMAS = K8S_CACHE / "schemas"
ARTIFACTS = {"sparkwire-gateway": "images/gateway/Dockerfile", "sparkwire-aggregator": "images/aggregator/Dockerfile"}
# artifact -> chart values it must set (repository, tag)
IMAGE_VALUES = {"sparkwire-gateway": "gateway.image", "sparkwire-aggregator": "aggregator.image"}
KIND_VALUES = CHART / "ci" / "kind-values.yaml"


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    loaded = load_yaml(SKAFFOLD)
    assert isinstance(loaded, dict)
    return loaded


def skaffold_schema() -> tuple[dict[str, Any], str]:
    """The schema of our apiVersion, from the skaffold module infra/k8s-tools.sh pins."""
    name = "skaffold-v4beta14.json"
    path = SCHEMAS / name
    if not path.is_file():
        unavailable(f"no skaffold JSON schema in {SCHEMAS}: run `bash infra/k8s-tools.sh`")
    return json.loads(path.read_text()), name


def sanitized(image: str) -> str:
    """Skaffold's name suffix of an image's template variables (util.SanitizeHelmTemplateValue)."""
    return re.sub(r"[./:-]", "_", image)


def release(config: dict[str, Any]) -> dict[str, Any]:
    releases = config["deploy"]["helm"]["releases"]
    assert len(releases) == 1, "one release: the sparkwire chart"
    rel: dict[str, Any] = releases[0]
    return rel


def test_is_valid_against_the_skaffold_schema(config: dict[str, Any]) -> None:
    schema, name = skaffold_schema()
    assert schema.get("$schema", "").startswith("http://json-schema.org/draft-07/"), name
    errors = sorted(Draft7Validator(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    assert not errors, f"{name}: " + "; ".join(f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors[:5])


def test_api_version_and_kind(config: dict[str, Any]) -> None:
    assert (config["apiVersion"], config["kind"]) == (API_VERSION, "Config")


def test_artifacts_are_the_two_images_built_from_the_repo_root(config: dict[str, Any]) -> None:
    artifacts = {a["image"]: a for a in config["build"]["artifacts"]}
    assert set(artifacts) == set(ARTIFACTS)
    for image, dockerfile in ARTIFACTS.items():
        assert artifacts[image]["context"] == "."
        assert artifacts[image]["docker"]["dockerfile"] == dockerfile
        assert (REPO / dockerfile).is_file()
    assert (REPO / ".dockerignore").is_file(), "the context is the repo root: keep .venv/.cache/.git out"


def test_set_value_templates_cover_every_artifact_with_skaffolds_variable_names(config: dict[str, Any]) -> None:
    templates = release(config)["setValueTemplates"]
    expected = {}
    for image, prefix in IMAGE_VALUES.items():
        suffix = sanitized(image)
        expected[f"{prefix}.repository"] = f"{{{{.IMAGE_REPO_{suffix}}}}}"
        expected[f"{prefix}.tag"] = f"{{{{.IMAGE_TAG_{suffix}}}}}@{{{{.IMAGE_DIGEST_{suffix}}}}}"
    assert templates == expected


def test_release_deploys_the_chart_in_its_namespace(config: dict[str, Any]) -> None:
    rel = release(config)
    assert rel["chartPath"] == "charts/sparkwire"
    assert (rel["name"], rel["namespace"]) == ("sparkwire", "sparkwire")
    assert rel["createNamespace"] is True


def test_kind_profile_loads_images_instead_of_pushing_and_uses_the_kind_values(config: dict[str, Any]) -> None:
    profiles = {p["name"]: p for p in config["profiles"]}
    kind = profiles["kind"]
    assert kind["build"]["local"]["push"] is False
    # `local` replaces the top-level one wholesale: it must not lose the other settings.
    top = {k: v for k, v in config["build"]["local"].items() if k != "push"}
    assert {k: v for k, v in kind["build"]["local"].items() if k != "push"} == top
    assert {"kubeContext": "kind-sparkwire"} in kind["activation"]
    patched = apply_patches(release(config), kind["patches"], prefix="/deploy/helm/releases/0")
    assert patched["valuesFiles"] == ["charts/sparkwire/ci/kind-values.yaml"]
    # `-p kind,e2e` (tests/e2e/kind/test_skaffold.py): the e2e values go on top of the kind values.
    patched = apply_patches(patched, profiles["e2e"]["patches"], prefix="/deploy/helm/releases/0")
    assert patched["valuesFiles"] == ["charts/sparkwire/ci/kind-values.yaml", "tests/e2e/kind/e2e-values.yaml"]
    assert (REPO / "tests/e2e/kind/e2e-values.yaml").is_file()


def apply_patches(target: dict[str, Any], patches: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """The JSON-patch `add` operations the profiles use (set a key, or append with `/-`) on one release."""
    result = dict(target)
    for patch in patches:
        assert patch["op"] == "add" and patch["path"].startswith(prefix + "/"), patch
        key = patch["path"][len(prefix) + 1:]
        if key.endswith("/-"):
            key = key[:-2]
            assert key in result, f"{patch['path']}: appends to a list no earlier profile created"
            result[key] = [*result[key], patch["value"]]
        else:
            result[key] = patch["value"]
        assert "/" not in key, patch
    return result


def test_port_forwards_the_gateway_service(config: dict[str, Any]) -> None:
    forwards = config["portForward"]
    assert {"resourceType": "service", "resourceName": "sparkwire-gateway", "namespace": "sparkwire",
            "port": 80, "localPort": 8080} in forwards
    grafana = {p["name"]: p for p in config["profiles"]}["grafana"]["portForward"]
    assert forwards[0] in grafana, "a profile's portForward replaces the list: keep the gateway's"


# --- against the chart (skipped until charts/sparkwire exists) ------------------------------------------


def test_set_value_templates_name_existing_chart_values(config: dict[str, Any]) -> None:
    chart = require_chart()
    values = load_yaml(chart / "values.yaml")
    for key in release(config)["setValueTemplates"]:
        try:
            value_at(values, key)
        except KeyError as missing:
            pytest.fail(f"setValueTemplates key {key!r}: {missing} is not in charts/sparkwire/values.yaml")


def test_kind_values_file_exists() -> None:
    require_chart()
    assert KIND_VALUES.is_file(), f"the kind profile uses {KIND_VALUES.relative_to(REPO)}"


def test_images_and_port_forward_target_match_the_rendered_chart(config: dict[str, Any]) -> None:
    """What `skaffold run -p kind` renders: the built images in the gateway Deployment and the
    SparkApplication, and a Service with the port the portForward names."""
    chart = require_chart()
    rel = release(config)
    # What skaffold's templates expand to for a local (not pushed) build: the digest is empty and
    # skaffold drops the trailing "@".
    set_values = {}
    for image, prefix in IMAGE_VALUES.items():
        set_values[f"{prefix}.repository"] = image
        set_values[f"{prefix}.tag"] = "0123abcd"
    values_files = [KIND_VALUES, REPO / "tests/e2e/kind/e2e-values.yaml"] if KIND_VALUES.is_file() else []
    objects = helm_template(chart, release=rel["name"], namespace=rel["namespace"], values_files=values_files,
                            set_values=set_values)
    images: dict[str, set[str]] = {}
    for obj in objects:
        for image in _images(obj):
            images.setdefault(obj["kind"], set()).add(image)
    assert "sparkwire-gateway:0123abcd" in images.get("Deployment", set()), images
    assert "sparkwire-aggregator:0123abcd" in images.get("SparkApplication", set()), images

    if values_files:  # kind + e2e: the clients of tests/e2e/kind come in through the cluster's Traefik
        [ingress] = [o for o in objects if o["kind"] == "Ingress" and o["metadata"]["name"] == "sparkwire-gateway"]
        assert ingress["spec"]["ingressClassName"] == "traefik"
        assert not any(k.startswith("nginx.") for k in ingress["metadata"].get("annotations") or {})
        backends = {path["path"]: path["backend"]["service"]["name"]
                    for rule in ingress["spec"]["rules"] for path in rule["http"]["paths"]}
        assert backends.get("/ws") == "sparkwire-gateway", backends

    forward = config["portForward"][0]
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    assert forward["resourceName"] in services, sorted(services)
    ports = [p["port"] for p in services[forward["resourceName"]]["spec"]["ports"]]
    assert forward["port"] in ports


def _images(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec", {})
    if obj["kind"] == "SparkApplication":
        return [spec["image"]] if "image" in spec else []
    pod = spec.get("template", {}).get("spec", {})
    return [c["image"] for c in pod.get("containers", []) + pod.get("initContainers", [])]



def test_build_args_default_to_the_dockerfiles_own_bases(config: dict[str, Any]) -> None:
    """skaffold passes every base as a build argument (so `make kind-up`'s offline stand-ins can replace
    them); unset, each must fall back to exactly the official image the Dockerfile itself defaults to."""
    for artifact in config["build"]["artifacts"]:
        dockerfile = (REPO / ARTIFACTS[artifact["image"]]).read_text()
        declared = dict(re.findall(r"^ARG (\w+_IMAGE)=(\S+)$", dockerfile, re.MULTILINE))
        args = artifact["docker"]["buildArgs"]
        assert set(args) == set(declared), artifact["image"]
        for name, template in args.items():
            match = re.fullmatch(r'\{\{default "([^"]+)" \.SPARKWIRE_(\w+)\}\}', template)
            assert match, template
            assert match.group(1) == declared[name] and match.group(2) == name, (name, template)
