"""The tools and images of `make kind-up`, as it recorded them in release.env (helm, skaffold, kind, kubectl;
the images the release was installed with), and the commands run with them on the cluster's context."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .progress import progress
from .settings import CHART, CONTEXT, E2E_VALUES, KIND_VALUES, NAMESPACE, RELEASE, RELEASE_ENV, ROOT

RELEASE_ENV_KEYS = ("SPARKWIRE_GATEWAY_IMAGE_REPOSITORY", "SPARKWIRE_GATEWAY_IMAGE_TAG",
                    "SPARKWIRE_AGGREGATOR_IMAGE_REPOSITORY", "SPARKWIRE_AGGREGATOR_IMAGE_TAG", "SPARKWIRE_HELM",
                    "SPARKWIRE_KUBECTL", "SPARKWIRE_SKAFFOLD", "SPARKWIRE_KIND_BIN", "SPARKWIRE_HELM_IMAGE_ARGS")
# What the tests run themselves and kind-up always builds; skaffold is built when a test first needs it
# where kind-up left it out (SPARKWIRE_KIND_SKAFFOLD=0, as CI does): ``Tools.skaffold_binary``.
EXECUTABLES = ("SPARKWIRE_HELM",)
BUILD_BINARIES = ROOT / "infra" / "kind" / "build-binaries.sh"

Run = Callable[..., subprocess.CompletedProcess[str]]


def parse_release_env(text: str, source: str = "release.env") -> dict[str, str]:
    """The shell `KEY=value` lines `make kind-up` writes (an optional `export`, quotes as the shell reads
    them); comments and blank lines skipped, anything else refused."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.removeprefix("export ").partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise AssertionError(f"{source}:{number}: not a KEY=value line: {raw!r}")
        values[key] = " ".join(shlex.split(value))
    return values


def read_release_env(path: Path = RELEASE_ENV) -> dict[str, str] | None:
    """release.env's values, or None when there is none."""
    return parse_release_env(path.read_text(), str(path)) if path.is_file() else None


def kubectl_binary() -> str | None:
    """kind-up's kubectl (the cluster's version) when release.env names it, else the one on PATH."""
    configured = (read_release_env() or {}).get("SPARKWIRE_KUBECTL")
    if configured and os.access(configured, os.X_OK):
        return configured
    return shutil.which("kubectl")


def kubectl_command(*args: str, namespaced: bool = True) -> list[str]:
    """kubectl on the cluster's context (and in the release's namespace unless ``namespaced`` is false)."""
    return [kubectl_binary() or "kubectl", "--context", CONTEXT, *(["-n", NAMESPACE] if namespaced else []), *args]


def kubectl(*args: str, timeout: float = 30, run: Run = subprocess.run) -> subprocess.CompletedProcess[str]:
    """kubectl in the release's namespace; a timeout is returned as exit status 124, not raised."""
    command = kubectl_command(*args)
    try:
        return run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(command, 124, text_of(expired.stdout), "timed out")


def text_of(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def release_env_problem(values: dict[str, str] | None, path: Path = RELEASE_ENV) -> str | None:
    """Why release.env cannot serve the helm and skaffold tests (missing, incomplete, a tool not there), or
    None."""
    if values is None:
        return f"no {path}: `make kind-up` writes it (the tools and images of the cluster)"
    missing = [key for key in RELEASE_ENV_KEYS if not values.get(key)]
    if missing:
        return f"{path} lacks {missing}: run `make kind-up` again"
    for key in EXECUTABLES:
        if not os.access(values[key], os.X_OK):
            return f"{key}={values[key]} in {path} is not an executable: run `make kind-up`"
    return None


@dataclass(frozen=True)
class Tools:
    """helm, skaffold, kind and kubectl, and the images, as `make kind-up` recorded them in release.env
    (checked by ``release_env_problem`` first)."""

    values: dict[str, str]
    run: Run = field(default=subprocess.run, compare=False, repr=False)

    @property
    def helm_binary(self) -> str:
        return self.values["SPARKWIRE_HELM"]

    @property
    def skaffold_binary(self) -> str:
        """kind-up's skaffold, built first (infra/kind/build-binaries.sh skaffold, into the folder release.env
        names) when kind-up left it out."""
        path = Path(self.values["SPARKWIRE_SKAFFOLD"])
        if not os.access(path, os.X_OK):
            progress(f"{path} missing (kind-up ran with SPARKWIRE_KIND_SKAFFOLD=0): building skaffold")
            # release.env names $SPARKWIRE_CACHE/kind/bin/skaffold: the same cache, so the same folder.
            env = {**os.environ, "SPARKWIRE_CACHE": str(path.parent.parent.parent)}
            self.run(["bash", str(BUILD_BINARIES), "skaffold"], check=True, env=env, timeout=3600)
        return str(path)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment (or ``base``) with all of release.env over it (skaffold's build reads
        some of it), and the tools' folders first on PATH: skaffold calls helm, kind and kubectl by name."""
        folders = [self.values["SPARKWIRE_KIND_BIN"], str(Path(self.values["SPARKWIRE_HELM"]).parent),
                   str(Path(self.values["SPARKWIRE_KUBECTL"]).parent)]
        env = {**(os.environ if base is None else base), **self.values}
        env["PATH"] = os.pathsep.join([*dict.fromkeys(folders), env.get("PATH", "")])
        return env

    def image_values(self) -> list[str]:
        """Every image value kind-up installed the release with (its own images; on the offline cluster
        also the Redis and Kafka stand-ins), as helm arguments."""
        return shlex.split(self.values["SPARKWIRE_HELM_IMAGE_ARGS"])

    def install_args(self) -> list[str]:
        """`helm install` of the release as `make kind-up` does it: the kind values, the e2e values and the
        images it built."""
        return [RELEASE, str(CHART), "--namespace", NAMESPACE, "--values", str(KIND_VALUES),
                "--values", str(E2E_VALUES), *self.image_values()]

    def helm_command(self, *args: str) -> list[str]:
        return [self.helm_binary, "--kube-context", CONTEXT, *args]

    def helm(self, *args: str, timeout: float) -> str:
        """Runs helm on the cluster's context; its output, or an AssertionError carrying it."""
        command = self.helm_command(*args)
        shown = " ".join(args[:3])
        progress(f"helm {shown} ...")
        started = time.monotonic()
        try:
            done = self.run(command, capture_output=True, text=True, timeout=timeout, env=self.env(), cwd=ROOT)
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(f"`{shlex.join(command)}` did not finish within {timeout}s; output:\n"
                                 f"{text_of(expired.stdout)}{text_of(expired.stderr)}") from None
        if done.returncode != 0:
            raise AssertionError(f"`{shlex.join(command)}` exited {done.returncode}:\n{done.stdout}{done.stderr}")
        progress(f"helm {shown}: done in {time.monotonic() - started:.0f}s")
        return done.stdout

    def helm_status(self) -> dict[str, Any]:
        status: dict[str, Any] = json.loads(self.helm("status", RELEASE, "--namespace", NAMESPACE, "--output",
                                                      "json", timeout=60))
        return status

    def revision(self) -> int:
        """The release's current revision (`helm status`)."""
        return int(self.helm_status()["version"])
