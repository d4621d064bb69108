"""Which kind tests a CI run takes: every name placed exists, each test runs in exactly one share or in all,
and every test runs within len(SHARES) consecutive commits."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sparkwire_harness.kind import rotation

KIND_TESTS = Path(__file__).resolve().parents[3] / "e2e" / "kind"


def kind_tests() -> list[str]:
    found = []
    for module in sorted(KIND_TESTS.glob("test_*.py")):
        tree = ast.parse(module.read_text())
        found += [f"{module.name}::{node.name}" for node in tree.body
                  if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    return found


def test_every_name_placed_is_a_kind_module_or_test() -> None:
    tests = kind_tests()
    modules = {test.split("::")[0] for test in tests}
    for name in rotation.CORE + tuple(name for share in rotation.SHARES for name in share):
        assert name in modules or name in tests, name


def test_each_share_takes_tests_and_every_test_runs_within_a_cycle_of_commits() -> None:
    tests = kind_tests()
    assert len(tests) >= 10
    for share in range(len(rotation.SHARES)):
        assert any(rotation.share_of_test(test) == share for test in tests), share
    taken = {test: [count for count in range(100, 100 + len(rotation.SHARES))
                    if rotation.runs_in(test, rotation.share_of_commit(count))] for test in tests}
    for test, counts in taken.items():
        core = rotation.share_of_test(test) is None
        assert len(counts) == (len(rotation.SHARES) if core else 1), (test, counts)
    assert rotation.share_of_test("test_kind_chaos.py::test_every_fault_in_one_run") is None
    assert rotation.share_of_test("test_kind_chaos.py::test_helm_upgrade_under_load") is not None
    assert rotation.share_of_test("test_new_module.py::test_x") is None  # placed nowhere: runs every time


def test_the_whole_suite_without_a_share() -> None:
    assert all(rotation.runs_in(test, None) for test in kind_tests())
    assert "every test" in rotation.describe(None)


def test_parametrised_ids_belong_to_their_function() -> None:
    share = rotation.share_of_test("test_replicated_redis.py")
    assert share is not None
    assert rotation.share_of_test("test_replicated_redis.py::test_a[1-2]") == share
    assert rotation.share_of_test("test_replicated_redis_more.py::test_a") is None


def test_the_setting() -> None:
    assert rotation.parse_share("", None) is None
    assert rotation.parse_share(" 1 ", None) == 1
    assert rotation.parse_share("auto", 7) == 7 % len(rotation.SHARES)
    for bad in ("3", "-1", "x", "auto"):
        with pytest.raises(ValueError, match="SPARKWIRE_KIND_SHARE"):
            rotation.parse_share(bad, None)
    line = rotation.describe(0)
    assert "share 0 of 3" in line and "test_replicated_redis.py" in line and "test_skaffold.py" in line


def test_auto_reads_the_checkouts_commit_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKWIRE_KIND_SHARE", "auto")
    share = rotation.share_from_environment(KIND_TESTS.parents[2])
    assert share is not None and 0 <= share < len(rotation.SHARES)
