"""Which kind tests a CI run takes: every *core* test, and one *share* of the others, the next share on the
next commit. The whole suite takes longer than CI's budget for it on a 2-core machine; the core tests are the
chaos that every change can break (every fault kind in one run: the driver, gateways and Redis killed under
load) and SSE through the ingress, the shares the rest, each taken every ``len(SHARES)`` commits. A test named
nowhere here is core: a new test runs until someone places it.

``SPARKWIRE_KIND_SHARE``: unset or empty, every test (``make e2e-kind``); ``auto``, the share of the checkout's
commit count (``git rev-list --count HEAD``: a re-run of one commit takes the same tests); ``0``..``N-1``, that
share. Pure functions, but for reading git and the environment in ``share_from_environment``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CORE = (
    "test_kind_chaos.py::test_every_fault_in_one_run",
    "test_sse_ingress.py",
)
# About equal in time (fresh-clone CI runs on 2 cores: ~6-8 min each with the core tests): the replicated
# Redis's switch, two failovers and a lost node, and the NetworkPolicies; a team's query and the real-time
# feed as chart jobs (~5 min with its helm upgrade) and a drain; skaffold, the rollouts, a helm upgrade and a
# fresh install.
SHARES = (
    ("test_replicated_redis.py", "test_network_policy.py"),
    ("test_own_query.py", "test_drain.py"),
    ("test_skaffold.py", "test_kind_chaos.py::test_rolling_restart_of_the_gateways",
     "test_kind_chaos.py::test_helm_upgrade_under_load", "test_helm_install.py"),
)


def _matches(test: str, name: str) -> bool:
    """``test`` ("module.py::function", parameters allowed) is ``name`` (a module, or a module's test)."""
    return test == name or test.startswith(name + "::") or test.startswith(name + "[")


def share_of_test(test: str) -> int | None:
    """The share ``test`` belongs to, or None for a core test (named in CORE or nowhere)."""
    for share, names in enumerate(SHARES):
        if any(_matches(test, name) for name in names):
            return share
    return None


def runs_in(test: str, share: int | None) -> bool:
    """Whether a run of ``share`` (None: the whole suite) takes ``test``."""
    own = share_of_test(test)
    return share is None or own is None or own == share


def share_of_commit(commit_count: int) -> int:
    return commit_count % len(SHARES)


def parse_share(value: str, commit_count: int | None) -> int | None:
    """``SPARKWIRE_KIND_SHARE``'s value: "" for all, "auto" for the commit's share, or a share's number."""
    value = value.strip()
    if value == "":
        return None
    if value == "auto":
        if commit_count is None:
            raise ValueError("SPARKWIRE_KIND_SHARE=auto needs a git checkout (git rev-list --count HEAD failed)")
        return share_of_commit(commit_count)
    if value.isdigit() and int(value) < len(SHARES):
        return int(value)
    raise ValueError(f"SPARKWIRE_KIND_SHARE={value!r}: expected '', 'auto' or 0..{len(SHARES) - 1}")


def share_from_environment(root: Path) -> int | None:
    value = os.environ.get("SPARKWIRE_KIND_SHARE", "")
    count: int | None = None
    if value.strip() == "auto":
        done = subprocess.run(["git", "-C", str(root), "rev-list", "--count", "HEAD"], capture_output=True,
                              text=True, check=False)
        count = int(done.stdout) if done.returncode == 0 and done.stdout.strip().isdigit() else None
    return parse_share(value, count)


def describe(share: int | None) -> str:
    """One line for the run's output: what it takes and what it leaves to the next commits."""
    if share is None:
        return "kind suite: every test (SPARKWIRE_KIND_SHARE unset)"
    left = [", ".join(names) for n, names in enumerate(SHARES) if n != share]
    return (f"kind suite: the core tests and share {share} of {len(SHARES)} ({', '.join(SHARES[share])}); "
            f"left to other commits: {' | '.join(left)}")
