"""skaffold on the kind cluster, as a developer uses it: `skaffold run -p kind,e2e` builds both images,
loads them into the node and deploys the release, which then serves clients exactly once; then one
`skaffold dev -p kind,e2e` cycle — a change to the demo page rebuilt, redeployed and served by the new
gateway pods through the ingress.

skaffold, and the helm, kind and kubectl it calls by name, come from release.env (`make kind-up`), whose
variables are all passed on: skaffold.yaml builds on this machine's offline base images through them.

`skaffold dev` runs with `--cleanup=false`: stopped with SIGINT it leaves the release deployed (its own
default deletes it), so the tests after it find one — running skaffold's images, the last gateway image
with the marker line in the page; test_helm_install, after this module, reinstalls release.env's images.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from sparkwire_harness.kind.ingress import http_get
from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.progress import progress
from sparkwire_harness.kind.redis_link import RedisLink
from sparkwire_harness.kind.release import read_release
from sparkwire_harness.kind.scenario import check_exactly_once, scenario
from sparkwire_harness.kind.settings import CONTEXT, ROOT
from sparkwire_harness.kind.tools import Tools

pytestmark = pytest.mark.slow

# Non-interactive (no survey or update prompts, no update check over the network), the profiles of
# tests/e2e/kind, the cluster's context, no port-forward (the tests go through the ingress; skaffold dev
# would otherwise take localhost:8080), and no cleanup when stopped: an interrupted skaffold deletes what it
# deployed by default, and the tests after these need the release.
COMMON_FLAGS = ["--profile", "kind,e2e", "--kube-context", CONTEXT, "--interactive=false", "--update-check=false",
                "--port-forward=off", "--cleanup=false"]
RUN_TIMEOUT = 900  # two image builds (the Docker layer cache usually has them) and `kind load`
DEV_DEPLOY_TIMEOUT = 600  # the first deploy of `skaffold dev`, and each redeploy after a change
STOP_TIMEOUT = 120
# Served at "/", packaged into the gateway image.
PAGE = ROOT / "services" / "sparkwire" / "gateway" / "static" / "index.html"
IMPORTANT = re.compile(r"^(Generating tags|Checking cache|Starting (build|deploy|test)|Build \[|Building \[|"
                       r"Loading images|Images loaded|Helm release|Waiting for deployments|Deployments stabilized|"
                       r"Press Ctrl\+C|Watching for changes|Listing files|Skipping|WARN|ERRO|FATA|"
                       r"exiting|Cleaning up|.*(error|failed))", re.IGNORECASE)
DEV_FAILURE = re.compile(r"Build \[[^\]]+\] failed|Skipping (test and )?deploy due to|Skipping render due to|"
                         r"exiting dev mode")


class Skaffold:
    """One skaffold command in the background, in its own process group; every output line kept (and
    the important ones shown as progress) for the failure messages."""

    def __init__(self, tools: Tools, *args: str) -> None:
        self.command = [tools.skaffold_binary, *args]
        progress(f"skaffold {' '.join(args)}")
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(self.command, cwd=ROOT, env=tools.env(), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.rstrip()
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
            if IMPORTANT.match(line.strip()):
                progress(f"  skaffold: {line.strip()}")
        with self._changed:
            self._changed.notify_all()

    def output(self, last: int = 200) -> str:
        with self._changed:
            return "\n".join(self.lines[-last:])

    def fail(self, why: str) -> AssertionError:
        return AssertionError(f"{why}\n`{' '.join(self.command)}` output (last lines):\n{self.output()}")

    def wait_exit(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise self.fail(f"skaffold did not finish within {timeout}s") from None
        self._reader.join(timeout=10)
        return code

    def wait_for(self, pattern: re.Pattern[str], *, after: int, timeout: float) -> int:
        """Index of the first line from ``after`` on that matches ``pattern``; fails if skaffold exits, reports
        a failed dev iteration or stays silent about it for ``timeout``."""
        deadline = time.monotonic() + timeout
        index = after
        with self._changed:
            while True:
                while index < len(self.lines):
                    line = self.lines[index]
                    if pattern.search(line):
                        return index
                    if DEV_FAILURE.search(line):
                        raise self.fail(f"skaffold reported a failure: {line!r}")
                    index += 1
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise self.fail(f"skaffold exited ({self.process.returncode}) before {pattern.pattern!r}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.fail(f"no {pattern.pattern!r} from skaffold within {timeout}s")
                self._changed.wait(min(remaining, 2))

    def failure_since(self, after: int) -> str | None:
        with self._changed:
            return next((line for line in self.lines[after:] if DEV_FAILURE.search(line)), None)

    def line_count(self) -> int:
        with self._changed:
            return len(self.lines)

    def stop(self) -> int | None:
        """SIGINT, as Ctrl+C (skaffold stops watching and, with --cleanup=false, leaves the deployment);
        SIGKILL to its process group if it does not end."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self._reader.join(timeout=10)
        return self.process.returncode


def deployed_revision(tools: Tools) -> int:
    status = tools.helm_status()
    assert status["info"]["status"] == "deployed", status["info"]
    return int(status["version"])


@pytest.mark.timeout(1800)
def test_skaffold_run_deploys_a_release_that_serves_exactly_once(kube: Kube, redis_link: RedisLink,
                                                                  tools: Tools) -> None:
    revision_before = deployed_revision(tools)
    run = Skaffold(tools, "run", *COMMON_FLAGS)
    code = run.wait_exit(RUN_TIMEOUT)
    if code != 0:
        raise run.fail(f"skaffold run exited {code}")
    assert deployed_revision(tools) > revision_before, "skaffold run must have upgraded the release"

    # A new aggregator image makes the operator replace the driver; a new gateway image rolls the gateways.
    app_image = kube.spark_application()["spec"]["image"]
    driver = kube.wait_for_driver(not_uid=None, image=app_image, timeout=420)
    progress(f"driver {driver.metadata.name} runs {app_image}")
    kube.wait_rolled_out()

    release = read_release(kube)
    clients, production = scenario(kube, redis_link, release, faults=None, seconds=20, clients=5)
    check_exactly_once(clients, production, redis_link, release, kube)


@pytest.fixture
def page_restored() -> Iterator[bytes]:
    """The demo page's bytes; written back afterwards, whatever happened."""
    original = PAGE.read_bytes()
    try:
        yield original
    finally:
        PAGE.write_bytes(original)


@pytest.mark.timeout(1800)
def test_skaffold_dev_redeploys_a_changed_page(kube: Kube, tools: Tools, page_restored: bytes) -> None:
    marker = f"sparkwire-e2e skaffold dev {uuid.uuid4().hex}"
    status, page = http_get("/")
    assert status == 200 and marker not in page, (status, page[:300])

    # Only the gateway image is watched: the page is in both images' build context (both copy services/),
    # and rebuilding the aggregator too would only restart Spark. Polling rather than inotify: the same
    # rebuild, and no dependence on the machine's file-system events.
    dev = Skaffold(tools, "dev", *COMMON_FLAGS, "--tail=false", "--trigger=polling",
                   "--watch-image=sparkwire-gateway")
    try:
        ready = dev.wait_for(re.compile(r"Press Ctrl\+C to exit"), after=0, timeout=DEV_DEPLOY_TIMEOUT)
        kube.wait_rolled_out()
        image_before = kube.gateway_deployment().spec.template.spec.containers[0].image
        progress(f"skaffold dev deployed (gateway image {image_before}); changing {PAGE.relative_to(ROOT)}")

        PAGE.write_bytes(page_restored + f"<!-- {marker} -->\n".encode())
        edited = ready + 1
        rebuilt = dev.wait_for(re.compile(r"Build \[sparkwire-gateway\] succeeded"), after=edited,
                               timeout=DEV_DEPLOY_TIMEOUT)
        served_by_every_pod(kube, dev, marker, image_before, after=edited, timeout=DEV_DEPLOY_TIMEOUT)
        progress("the new gateway pods serve the changed page through the ingress")
        # The pods can serve the change before skaffold's `helm upgrade` has returned; stopped before
        # that, skaffold cancels the upgrade and the release is left `failed` (seen on the first run).
        dev.wait_for(re.compile(r"Watching for changes"), after=rebuilt, timeout=DEV_DEPLOY_TIMEOUT)
    finally:
        code = dev.stop()
        progress(f"skaffold dev stopped ({code})")

    # --cleanup=false: stopped, skaffold dev leaves the release deployed, for the tests after this one.
    deployed_revision(tools)
    kube.wait_rolled_out()


def served_by_every_pod(kube: Kube, dev: Skaffold, marker: str, image_before: str, *, after: int,
                        timeout: float) -> None:
    """The Deployment moved to a new image, rolled out, and every response through the ingress (which
    spreads requests over every ready pod) has the marker: twice as many requests in a row as pods."""
    deadline = time.monotonic() + timeout
    pods = kube.gateway_deployment().spec.replicas
    while time.monotonic() < deadline:
        failure = dev.failure_since(after)
        if failure is not None:
            raise dev.fail(f"skaffold dev reported a failure: {failure!r}")
        if dev.process.poll() is not None:
            raise dev.fail(f"skaffold dev exited ({dev.process.returncode}) before redeploying")
        image = kube.gateway_deployment().spec.template.spec.containers[0].image
        if image != image_before and kube.rolled_out():
            pages = [http_get("/") for _ in range(2 * pods)]
            if all(status == 200 and marker in page for status, page in pages):
                return
        time.sleep(3)
    raise dev.fail(f"the gateways did not serve the changed page within {timeout}s "
                   f"(image {kube.gateway_deployment().spec.template.spec.containers[0].image})")
