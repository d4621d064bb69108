"""Runtime requirements of the sparkwire images, derived from pyproject.toml (the one place they are pinned).

    python images/requirements.py pyproject.toml            # the `server` extra's pins but pyspark, one a line
    python images/requirements.py pyproject.toml --pyspark  # the pyspark version pinned there

pyspark is left out of the images' pip installs: the aggregator image takes it from the official Spark
distribution of the same version (/opt/spark/python), and the gateway never imports it. Everything else is
installed with ``pip install -c constraints.txt -r <this output>``, so the whole resolved set stays pinned.
Standard library only (tomllib): it runs in the build stage before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PROVIDED_BY_SPARK = "pyspark"


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


SERVER_EXTRA = "server"


def dependencies(pyproject: Path) -> list[str]:
    """The services' direct dependencies: the ``server`` extra (the package's own list is empty so that
    ``sparkwire[client]`` installs no Spark and no Redis)."""
    return list(tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"][SERVER_EXTRA])


def runtime_requirements(pyproject: Path) -> list[str]:
    """Every direct dependency except pyspark, exactly as pinned in pyproject.toml."""
    return [r for r in dependencies(pyproject) if _name(r) != PROVIDED_BY_SPARK]


def pyspark_version(pyproject: Path) -> str:
    for requirement in dependencies(pyproject):
        if _name(requirement) == PROVIDED_BY_SPARK:
            match = re.fullmatch(r"pyspark\s*==\s*([0-9][0-9A-Za-z.]*)", requirement.strip(), re.IGNORECASE)
            if match is None:
                raise ValueError(f"pyspark must be pinned with ==, got {requirement!r}")
            return match.group(1)
    raise ValueError("pyspark is not a dependency in pyproject.toml")


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] != "--pyspark"):
        print(__doc__, file=sys.stderr)
        return 2
    pyproject = Path(argv[0])
    lines = [pyspark_version(pyproject)] if len(argv) == 2 else runtime_requirements(pyproject)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
