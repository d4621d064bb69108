"""Why there is no Docker engine, said with `docker info`'s own last line."""

from __future__ import annotations

import subprocess
from typing import Any

from sparkwire_harness.kind.availability import docker_problem


def run_giving(result: subprocess.CompletedProcess[str] | Exception) -> Any:
    def run(command: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert command[1:] == ["info", "--format", "{{.ServerVersion}}"]
        if isinstance(result, Exception):
            raise result
        return result
    return run


def test_no_docker_cli() -> None:
    assert "no docker CLI" in str(docker_problem(lambda _name: None))


def test_an_engine_that_does_not_answer_is_named_by_dockers_last_line() -> None:
    failed = subprocess.CompletedProcess([], 1, "", "Client: ...\nCannot connect to the Docker daemon\n")
    problem = docker_problem(lambda _name: "/usr/bin/docker", run_giving(failed))
    assert problem is not None and "(`docker info`: Cannot connect to the Docker daemon)" in problem


def test_a_docker_info_that_hangs() -> None:
    problem = docker_problem(lambda _name: "docker", run_giving(subprocess.TimeoutExpired(["docker"], 30)))
    assert problem is not None and "timed out" in problem


def test_an_engine_that_answers() -> None:
    answered = subprocess.CompletedProcess([], 0, "27.3.1\n", "")
    assert docker_problem(lambda _name: "docker", run_giving(answered)) is None
