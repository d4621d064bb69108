"""kube-score over every rendered values scenario. Checks it skips or excuses, with their reasons, are in
charts/sparkwire/kube-score.yaml; an excuse that matches nothing fails too."""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import CHART, CI_VALUES, KUBE_VERSION, render_text, tool

CONFIG = yaml.safe_load((CHART / "kube-score.yaml").read_text())
VALUES_CASES = [pytest.param(None, id="defaults")] + [pytest.param(p, id=p.stem) for p in CI_VALUES]


def _kube_score(manifests: str) -> list[dict[str, Any]]:
    command = [str(tool("kube-score")), "score", "--kubernetes-version", f"v{KUBE_VERSION}", "--output-format", "json"]
    for check in CONFIG["enable"]:
        command += ["--enable-optional-test", check]
    command += [entry["flag"] for entry in CONFIG["flags"]]
    result = subprocess.run([*command, "-"], input=manifests, capture_output=True, text=True, timeout=60,
                            check=False)
    try:
        report: list[dict[str, Any]] = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"kube-score gave no JSON report:\n{result.stdout}\n{result.stderr}") from None
    return report


def _excuse(check: str, kind: str, name: str) -> dict[str, Any] | None:
    for entry in CONFIG["ignore"]:
        if entry["check"] == check and any(
                fnmatch.fnmatchcase(f"{kind}/{name}", pattern) for pattern in entry["objects"]):
            return dict(entry)
    return None


def test_every_excuse_has_a_reason() -> None:
    for entry in [*CONFIG["flags"], *CONFIG["ignore"]]:
        assert len(entry.get("reason", "").split()) >= 8, f"no real reason given for {entry}"


def _findings(values: Path | None) -> tuple[list[str], set[str]]:
    report = _kube_score(render_text([values] if values else []))
    assert report, "kube-score scored nothing"
    problems, excused = [], set()
    for obj in report:
        kind, name = obj["type_meta"]["kind"], obj["object_meta"]["name"]
        for result in obj["checks"]:
            if result["skipped"] or result["grade"] >= 10:
                continue
            check = result["check"]["id"]
            excuse = _excuse(check, kind, name)
            if excuse is not None:
                excused.add(check)
                continue
            comments = "; ".join(f"{c.get('path', '')} {c['summary']}" for c in result["comments"] or [])
            problems.append(f"{kind}/{name}: {check} (grade {result['grade']}): {comments}")
    return problems, excused


@pytest.mark.parametrize("values", VALUES_CASES)
def test_kube_score_is_clean(values: Path | None) -> None:
    problems, _ = _findings(values)
    assert not problems, "\n".join(problems)


def test_every_excuse_is_still_needed() -> None:
    used: set[str] = set()
    for values in [None, *CI_VALUES]:
        used |= _findings(values)[1]
    stale = {entry["check"] for entry in CONFIG["ignore"]} - used
    assert not stale, f"kube-score.yaml excuses checks that no longer fail: {sorted(stale)}"
