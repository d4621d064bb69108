"""values.yaml is documented (helm-docs style) and schema-checked; the README's values table is current;
Chart.yaml carries the agreed metadata."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from .conftest import CHART, CI_VALUES, NAMESPACE, RELEASE, tool
from .values_doc import README, VALUES, documented, leaf_paths, readme_with_table

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def test_every_value_has_a_description() -> None:
    docs = documented()
    undocumented = [path for path in leaf_paths(yaml.safe_load(VALUES.read_text()))
                    if not any(path == key or path.startswith(key + ".") for key in docs)]
    assert not undocumented, f"values without a `# --` comment: {undocumented}"
    assert all(len(text.split()) >= 2 for text in docs.values())


def test_readme_values_table_is_current() -> None:
    readme = README.read_text()
    assert readme == readme_with_table(readme), "run `.venv/bin/python tests/chart/values_doc.py`"


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def test_values_and_ci_files_satisfy_the_draft7_schema() -> None:
    Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    validator = Draft7Validator(SCHEMA)
    defaults = yaml.safe_load(VALUES.read_text())
    for path in [None, *CI_VALUES]:
        values = _merged(defaults, yaml.safe_load(path.read_text()) or {}) if path else defaults
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(values)]
        assert not errors, f"{path}: {errors}"


def test_schema_closes_every_section() -> None:
    """Typos in value names fail instead of being ignored: every object of values.yaml's structure that is
    not free-form (labels, resources, security contexts, ...) is additionalProperties: false."""
    def walk(schema: dict[str, Any], values: Any, where: str) -> None:
        if not isinstance(values, dict) or "properties" not in schema:
            return
        assert schema.get("additionalProperties") is False, where
        assert set(values) <= set(schema["properties"]), f"{where}: {set(values) - set(schema['properties'])}"
        for key, value in values.items():
            walk(schema["properties"][key], value, f"{where}.{key}")

    walk(SCHEMA, yaml.safe_load(VALUES.read_text()), "values")


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["apiVersion"], chart["name"], chart["version"], chart["appVersion"]) == (
        "v2", "sparkwire", "0.1.0", "0.1.0")
    assert chart["kubeVersion"].startswith(">=1.27")
    assert chart["type"] == "application"
    from sparkwire import __version__

    assert chart["appVersion"] == __version__, "appVersion is the default image tag: the package's version"


def _notes(values: Path | None) -> str:
    command = [str(tool("helm")), "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    if values is not None:
        command += ["--values", str(values)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:", 1)[1]


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda p: p.stem if p else "defaults")
def test_notes_render(values: Path | None) -> None:
    notes = _notes(values)
    assert "stream \"metrics\"" in notes
    auth_on = values is None or values.stem != "no-auth-values"
    assert ("authentication is OFF" in notes) != auth_on
    idp = values is not None and values.stem == "jwks-values"  # tokens from an identity provider: none minted
    assert ("sparkwire token --streams metrics --ttl-ms 3600000" in notes) == (auth_on and not idp)
    secret = "sparkwire-jwt" if values is not None and values.stem == "existing-secrets-values" else \
        f"{RELEASE}-sparkwire-gateway-auth"
    assert (f"get secret {secret} -o jsonpath=" in notes) == (auth_on and not idp)
    assert ("a token from your identity provider" in notes) == idp
    if values is not None and values.stem == "auth-ingress-values":
        assert "wss://ws.example.com/ws?stream=metrics" in notes
    elif values is not None and values.stem == "http-route-values":
        assert f"wss://ws.example.com/ws?stream=metrics  (HTTPRoute {RELEASE}-sparkwire-gateway;" in notes
        assert "port-forward" not in notes
    else:
        assert f"port-forward svc/{RELEASE}-sparkwire-gateway 8080:80" in notes
