"""The Gateway API HTTPRoute (`gateway.httpRoute`): off by default; on, it attaches to the given Gateways and
sends the Ingress's paths to the gateway Service's port, without session persistence and without /sse;
the schema refuses unknown keys and bad types; kubectl-validate checks it against the standard channel's
HTTPRoute CRD (.cache/k8s/crds, from infra/k8s-tools.sh) as strictly as the other CRD kinds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import CHART, FULLNAME, Obj, crds_dir, find, has, render, render_error
from .test_lint_validate import _failures, _kubectl_validate

VALUES = CHART / "ci" / "http-route-values.yaml"
GATEWAY = f"{FULLNAME}-gateway"
ON = {"gateway.httpRoute.enabled": True,
      "gateway.httpRoute.parentRefs": [{"name": "public", "namespace": "gateway-system"}]}


def _route(values: list[Path] | None = None, sets: dict[str, Any] | None = None) -> Obj:
    return find(render(values or [], sets), "HTTPRoute", GATEWAY)


def _matches(route: Obj) -> list[tuple[str, str]]:
    return [(m["path"]["type"], m["path"]["value"]) for rule in route["spec"]["rules"] for m in rule["matches"]]


def test_off_by_default(default_objects: list[Obj]) -> None:
    assert not has(default_objects, "HTTPRoute")
    assert not has(render(sets={"gateway.ingress.enabled": True}), "HTTPRoute")


def test_route_attaches_to_the_parents_and_matches_the_hostnames() -> None:
    route = _route([VALUES])
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["kind"] == "HTTPRoute"
    assert route["metadata"]["namespace"] == "streaming"
    assert route["spec"]["parentRefs"] == [{"name": "public", "namespace": "gateway-system", "sectionName": "https"}]
    assert route["spec"]["hostnames"] == ["ws.example.com"]
    labels = route["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "gateway"
    assert labels["gateway.example.com/exposed"] == "true"
    assert route["metadata"]["annotations"] == {"example.com/owner": "streaming-team"}


def test_no_hostnames_or_annotations_when_not_given() -> None:
    route = _route(sets=ON)
    assert "hostnames" not in route["spec"]
    assert "annotations" not in route["metadata"]


@pytest.mark.parametrize("port", [80, 8080])
def test_backend_is_the_gateway_services_port(port: int) -> None:
    objects = render(sets={**ON, "gateway.service.port": port})
    service = find(objects, "Service", GATEWAY)
    route = find(objects, "HTTPRoute", GATEWAY)
    (service_port,) = service["spec"]["ports"]
    for rule in route["spec"]["rules"]:
        assert rule["backendRefs"] == [{"name": service["metadata"]["name"], "port": service_port["port"]}]
    assert service_port["port"] == port


def test_routes_what_the_ingress_routes_unsticky() -> None:
    """The Ingress's paths, Prefix as PathPrefix; one rule, no session persistence (any pod resumes any
    client); /sse stays with the Ingress's sticky SSE Service, which Gateway API's standard channel cannot
    express."""
    objects = render(sets={**ON, "gateway.ingress.enabled": True})
    ingress = find(objects, "Ingress", GATEWAY)
    routed = [(p["pathType"], p["path"]) for p in ingress["spec"]["rules"][0]["http"]["paths"]]
    route = find(objects, "HTTPRoute", GATEWAY)
    expected = [("PathPrefix" if kind == "Prefix" else kind, path) for kind, path in routed]
    assert _matches(route) == expected
    assert {("Exact", "/ws"), ("Exact", "/snapshot"), ("Exact", "/history"), ("Exact", "/"),
            ("PathPrefix", "/static")} <= set(expected)
    assert not any(path.startswith("/sse") for _, path in _matches(route))
    assert all("sessionPersistence" not in rule for rule in route["spec"]["rules"])
    assert route["metadata"].get("annotations") is None


def test_own_paths_replace_the_ingress_paths() -> None:
    route = _route(sets={**ON, "gateway.httpRoute.paths": [{"path": "/ws", "type": "Exact"},
                                                           {"path": "/", "type": "PathPrefix"}]})
    assert _matches(route) == [("Exact", "/ws"), ("PathPrefix", "/")]


def test_ingress_paths_that_cannot_carry_over_are_refused() -> None:
    sets = {**ON, "gateway.ingress.paths": [{"path": "/ws", "pathType": "ImplementationSpecific"}]}
    assert "set gateway.httpRoute.paths" in render_error(sets=sets)
    route = _route(sets={**sets, "gateway.httpRoute.paths": [{"path": "/ws", "type": "Exact"}]})
    assert _matches(route) == [("Exact", "/ws")]


def test_enabled_without_parent_refs_is_refused() -> None:
    assert "gateway.httpRoute.parentRefs" in render_error(sets={"gateway.httpRoute.enabled": True})


@pytest.mark.parametrize(("key", "value", "complaint"), [
    ("gateway.httpRoute.bogus", True, "bogus"),
    ("gateway.httpRoute.parentRefs", [{"name": "public", "bogus": 1}], "bogus"),
    ("gateway.httpRoute.parentRefs", [{"namespace": "gateway-system"}], "name"),
    ("gateway.httpRoute.parentRefs", [{"name": "public", "port": "443"}], "port"),
    ("gateway.httpRoute.paths", [{"path": "/ws", "type": "Exact", "bogus": 1}], "bogus"),
    ("gateway.httpRoute.paths", [{"path": "/ws", "type": "Prefix"}], "type"),
    ("gateway.httpRoute.paths", [{"path": "ws", "type": "Exact"}], "path"),
    ("gateway.httpRoute.enabled", "yes", "enabled"),
    ("gateway.httpRoute.hostnames", "ws.example.com", "hostnames"),
    ("gateway.httpRoute.annotations", {"a": 1}, "annotations"),
    ("gateway.httpRoute.labels", ["a"], "labels"),
])
def test_schema_refuses_unknown_keys_and_bad_types(key: str, value: Any, complaint: str) -> None:
    error = render_error(sets={**ON, key: value})
    assert "values don't meet the specifications of the schema" in error, error
    assert complaint in error, error


def test_the_httproute_crd_is_there_for_kubectl_validate() -> None:
    assert (crds_dir() / "gateway.networking.k8s.io_httproutes.yaml").is_file(), \
        "no HTTPRoute CRD in .cache/k8s/crds: run `make setup` (infra/k8s-tools.sh copies it)"


def test_kubectl_validate_accepts_the_route_and_catches_a_typo(tmp_path: Path) -> None:
    """The ci scenario's objects are validated with the others (test_lint_validate); here the route alone,
    then with a misspelt field: the CRD's schema is applied, not skipped as an unknown kind."""
    route, typo = _route([VALUES]), _route([VALUES])
    typo["spec"]["rules"][0]["backendRefs"][0]["bogusField"] = 1
    found = _kubectl_validate({"ok": [route], "typo": [typo]}, tmp_path, "1.33")
    assert found["ok"] and not _failures(found["ok"])
    assert "bogusField" in _failures(found["typo"])
