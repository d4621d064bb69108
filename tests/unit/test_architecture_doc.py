"""docs/architecture.md names the modules that do each step; each name must still exist, so the picture
cannot drift from the code unnoticed. A name is resolved to a file, not imported: naming a Spark module must
not need pyspark here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE_DIRS = {"sparkwire": ROOT / "services" / "sparkwire",
                "sparkwire_harness": ROOT / "harness" / "sparkwire_harness"}
# A dotted module name (at least one dot) or a repository path in the page, in backticks or in the diagram.
MODULE = re.compile(r"\b(sparkwire(?:_harness)?(?:\.[a-z_][a-z0-9_]*)+)")
PATH = re.compile(r"`((?:services|harness|charts|images|spark-operator|infra|tests)/[^`\s]+)`")


def module_file(name: str) -> Path | None:
    """The module's file or package folder, or None when neither exists."""
    top, *parts = name.split(".")
    base = PACKAGE_DIRS[top].joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def named_modules() -> list[str]:
    return sorted(set(MODULE.findall(PAGE.read_text())))


def test_the_page_names_modules() -> None:
    # Guards the test itself: a regex that matched nothing would make every check below vacuous.
    assert len(named_modules()) >= 15


@pytest.mark.parametrize("name", named_modules())
def test_named_module_exists(name: str) -> None:
    assert module_file(name) is not None, f"docs/architecture.md names {name}, which is no module"


@pytest.mark.parametrize("path", sorted(set(PATH.findall(PAGE.read_text()))))
def test_named_path_exists(path: str) -> None:
    assert (ROOT / path).exists(), f"docs/architecture.md names {path}, which does not exist"


def test_a_missing_module_is_caught() -> None:
    assert module_file("sparkwire.gateway.no_such_room") is None
    assert module_file("sparkwire.replaylog.writer") is not None
