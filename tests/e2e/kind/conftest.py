"""sparkwire on the kind cluster of `make kind-up`: the real pipeline — a producer Job writing events into the
chart's Kafka, the aggregator SparkApplication committing windows into the chart's Redis, the gateway
Deployment behind the Traefik ingress — while pods are deleted, rolled and upgraded under running clients,
and the release is deployed by skaffold and installed from scratch. The library the tests use is
``sparkwire_harness.kind``; this file holds only the pytest side: the fixtures that wire it together, when the
tests run and in what order.

Availability: a Docker engine, the kubeconfig context of the cluster, the release deployed in it and the
ingress answering; the helm and skaffold tests also need `.cache/kind/release.env`, which `make kind-up`
writes. They run only when asked (`make e2e-kind`, or SPARKWIRE_KIND=1), not in `make test`. Asked with
SPARKWIRE_KIND=1 and without a cluster, every test is skipped with the reason; with SPARKWIRE_KIND_REQUIRED=1
(set by `make e2e-kind`) the same reason fails the test: a run that was meant to exercise the cluster must
not pass by skipping all of it.

Order (``pytest_collection_modifyitems`` below): test_kind_chaos.py first (on the release as `make kind-up`
installed it), then test_network_policy.py (probe pods, the release untouched), then test_own_query.py
(adds a job to the release with helm, rolls it back after), then test_replicated_redis.py (switches the
release to the replicated Redis with helm once for its two tests and rolls it back after; the second stops
a worker's container and starts it again), then test_drain.py (drains a worker, uncordons it
after), then test_skaffold.py (skaffold redeploys the release), then test_helm_install.py, which uninstalls
the release and deletes its volumes, so it goes last and leaves a release installed from release.env's
images.

Environment: tests/e2e/kind/README.md (``sparkwire_harness.kind.settings`` reads it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from sparkwire_harness.kind import progress, rotation
from sparkwire_harness.kind.availability import unavailable
from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.redis_link import RedisLink
from sparkwire_harness.kind.release import Release, read_release
from sparkwire_harness.kind.replicated import Replicated, replicated_release
from sparkwire_harness.kind.settings import REQUIRED, WANTED
from sparkwire_harness.kind.tools import Tools, read_release_env, release_env_problem

HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    progress.attach(config)  # progress lines get past pytest's capture


# --- test order -------------------------------------------------------------------------------------------

_MODULE_ORDER = {name: rank for rank, name in enumerate([
    "test_kind_chaos.py", "test_network_policy.py", "test_own_query.py", "test_replicated_redis.py",
    "test_drain.py", "test_skaffold.py", "test_sse_ingress.py", "test_helm_install.py"])}
# test_helm_install.py reinstalls the release (a new token secret, new claims): nothing may run after it, so
# a module not named above runs just before it.
_LAST = _MODULE_ORDER["test_helm_install.py"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules of this folder in the order the module docstring explains, each module's tests in file
    order; tests elsewhere keep their places (this hook sees the whole session's items). With
    SPARKWIRE_KIND_SHARE (CI's run), only the core tests and that share (``sparkwire_harness.kind.rotation``)."""
    try:
        share = rotation.share_from_environment(HERE.parents[2])
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and any(item.path.parent == HERE for item in items):
        reporter.write_line(progress.line(rotation.describe(share)))
    left = [item for item in items if item.path.parent == HERE and not rotation.runs_in(
        f"{item.path.name}::{item.name}", share)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item not in left]
    slots = [i for i, item in enumerate(items) if item.path.parent == HERE]
    ordered = sorted((items[i] for i in slots), key=lambda item: _MODULE_ORDER.get(item.path.name, _LAST - 0.5))
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item


# --- is there a cluster to test? -------------------------------------------------------------------------


def cannot_run(reason: str) -> NoReturn:
    """Skip with the reason, or fail with it when SPARKWIRE_KIND_REQUIRED=1."""
    if REQUIRED:
        pytest.fail(f"{reason} [SPARKWIRE_KIND_REQUIRED=1: the kind tests fail instead of skipping]",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True, scope="session")
def _kind_cluster_required() -> None:
    if not WANTED:
        pytest.skip("the kind tests run with `make e2e-kind` (or SPARKWIRE_KIND=1 against a cluster of "
                    "`make kind-up`): ~17 min, and they reinstall the release")
    reason = unavailable()
    if reason is not None:
        cannot_run(reason)


# --- the fixtures -----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tools() -> Tools:
    """release.env's tools and images (the helm and skaffold tests)."""
    values = read_release_env()
    problem = release_env_problem(values)
    if problem is not None or values is None:
        cannot_run(problem or "no release.env")
    return Tools(values)


@pytest.fixture(scope="session")
def kube() -> Kube:
    return Kube.connect()


@pytest.fixture(scope="session")
def release(kube: Kube) -> Release:
    return read_release(kube)


@pytest.fixture(scope="session")
def redis_link(kube: Kube) -> Iterator[RedisLink]:
    link = RedisLink(kube)
    try:
        yield link
    finally:
        link.close()


@pytest.fixture(scope="module")
def replicated_redis(tools: Tools, kube: Kube, redis_link: RedisLink, release: Release) -> Iterator[Replicated]:
    """The release on the replicated Redis for a module's tests, then back on the single one. Module-scoped:
    the switch and the way back take ~2.5 min each, so every test of the module that needs it shares one."""
    with replicated_release(tools, kube, redis_link, release) as replicated:
        yield replicated
