"""release.env as the shell reads it, what makes it unusable, and the helm and kubectl commands built from it;
helm's failures and timeouts carry its output."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sparkwire_harness.kind import tools
from sparkwire_harness.kind.tools import BUILD_BINARIES, RELEASE_ENV_KEYS, Tools, parse_release_env, release_env_problem


def test_release_env_lines_are_read_as_the_shell_reads_them() -> None:
    text = "# written by make kind-up\n\nexport A=1\nB='two words'\nC=\"--set x=1 --set y=2\"\nD=\n"
    assert parse_release_env(text) == {"A": "1", "B": "two words", "C": "--set x=1 --set y=2", "D": ""}


@pytest.mark.parametrize("line", ["no equals sign", "1A=x", "A B=x"])
def test_a_line_that_is_no_assignment_is_refused_with_its_place(line: str) -> None:
    with pytest.raises(AssertionError, match=r"release.env:2: not a KEY=value line"):
        parse_release_env(f"A=1\n{line}\n")


def executable(folder: Path, name: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def complete(tmp_path: Path) -> dict[str, str]:
    values = dict.fromkeys(RELEASE_ENV_KEYS, "x")
    values |= {"SPARKWIRE_HELM": executable(tmp_path, "helm"), "SPARKWIRE_SKAFFOLD": executable(tmp_path, "skaffold"),
               "SPARKWIRE_KUBECTL": str(tmp_path / "k8s" / "kubectl"), "SPARKWIRE_KIND_BIN": str(tmp_path / "kind"),
               "SPARKWIRE_HELM_IMAGE_ARGS": "--set gateway.image.tag=abc --set 'aggregator.image.tag=d e'"}
    return values


def test_release_env_problems_name_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "release.env"
    assert "no " in str(release_env_problem(None, path)) and "make kind-up" in str(release_env_problem(None, path))
    values = complete(tmp_path)
    assert release_env_problem(values, path) is None
    lacking = {k: v for k, v in values.items() if k != "SPARKWIRE_KUBECTL"}
    assert "lacks ['SPARKWIRE_KUBECTL']" in str(release_env_problem(lacking, path))
    gone = values | {"SPARKWIRE_HELM": str(tmp_path / "missing")}
    assert "SPARKWIRE_HELM=" in str(release_env_problem(gone, path))
    # skaffold is not needed up front: a test that runs it builds it (Tools.skaffold_binary).
    assert release_env_problem(values | {"SPARKWIRE_SKAFFOLD": str(tmp_path / "missing")}, path) is None


def test_a_missing_skaffold_is_built_into_the_folder_release_env_names(tmp_path: Path) -> None:
    calls: list[tuple[list[str], dict[str, str]]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append((command, kwargs["env"]))
        return subprocess.CompletedProcess(command, 0, "", "")

    missing = tmp_path / "cache" / "kind" / "bin" / "skaffold"
    tools = Tools(complete(tmp_path) | {"SPARKWIRE_SKAFFOLD": str(missing)}, run=run)
    assert tools.skaffold_binary == str(missing)
    [(command, env)] = calls
    assert command[1:] == [str(BUILD_BINARIES), "skaffold"] and env["SPARKWIRE_CACHE"] == str(tmp_path / "cache")
    present = Tools(complete(tmp_path), run=run)
    assert present.skaffold_binary == str(tmp_path / "skaffold") and len(calls) == 1


def test_the_tools_folders_come_first_on_path_and_release_env_goes_to_the_environment(tmp_path: Path) -> None:
    values = complete(tmp_path)
    env = Tools(values).env({"PATH": "/usr/bin", "HOME": "/root"})
    assert env["PATH"].split(os.pathsep) == [str(tmp_path / "kind"), str(tmp_path), str(tmp_path / "k8s"), "/usr/bin"]
    assert env["HOME"] == "/root" and env["SPARKWIRE_HELM_IMAGE_ARGS"] == values["SPARKWIRE_HELM_IMAGE_ARGS"]


def test_install_args_carry_both_values_files_and_the_images(tmp_path: Path) -> None:
    args = Tools(complete(tmp_path)).install_args()
    assert args[:4] == [tools.RELEASE, str(tools.CHART), "--namespace", tools.NAMESPACE]
    assert args[4:8] == ["--values", str(tools.KIND_VALUES), "--values", str(tools.E2E_VALUES)]
    assert args[8:] == ["--set", "gateway.image.tag=abc", "--set", "aggregator.image.tag=d e"]


class FakeRun:
    def __init__(self, result: subprocess.CompletedProcess[str] | Exception) -> None:
        self.result = result
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((command, kwargs))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_helm_runs_on_the_clusters_context_and_returns_its_output(tmp_path: Path) -> None:
    run = FakeRun(subprocess.CompletedProcess([], 0, '{"version": 7}', ""))
    helm = Tools(complete(tmp_path), run=run)
    assert helm.revision() == 7
    [(command, kwargs)] = run.calls
    assert command == [helm.helm_binary, "--kube-context", tools.CONTEXT, "status", tools.RELEASE, "--namespace",
                       tools.NAMESPACE, "--output", "json"]
    assert kwargs["timeout"] == 60 and kwargs["cwd"] == tools.ROOT and "SPARKWIRE_HELM" in kwargs["env"]


def test_a_failed_helm_raises_with_its_output(tmp_path: Path) -> None:
    helm = Tools(complete(tmp_path), run=FakeRun(subprocess.CompletedProcess([], 1, "out\n", "Error: boom\n")))
    with pytest.raises(AssertionError, match=r"exited 1:\nout\nError: boom"):
        helm.helm("upgrade", "x", timeout=5)


def test_a_helm_that_runs_out_of_time_raises_with_what_it_said(tmp_path: Path) -> None:
    expired = subprocess.TimeoutExpired(["helm"], 5, output=b"waiting for pods\n", stderr=None)
    helm = Tools(complete(tmp_path), run=FakeRun(expired))
    with pytest.raises(AssertionError, match=r"did not finish within 5s; output:\nwaiting for pods"):
        helm.helm("install", "x", timeout=5)


def test_kubectl_is_namespaced_unless_told_and_a_timeout_is_exit_124(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "kubectl_binary", lambda: "/bin/kubectl")
    assert tools.kubectl_command("get", "pods") == ["/bin/kubectl", "--context", tools.CONTEXT, "-n", tools.NAMESPACE,
                                                    "get", "pods"]
    assert tools.kubectl_command("drain", "n1", namespaced=False) == ["/bin/kubectl", "--context", tools.CONTEXT,
                                                                      "drain", "n1"]
    done = tools.kubectl("logs", "p", run=FakeRun(subprocess.TimeoutExpired(["kubectl"], 3, output="partial")))
    assert (done.returncode, done.stdout, done.stderr) == (124, "partial", "timed out")
