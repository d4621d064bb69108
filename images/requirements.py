"""Runtime requirements of the sparkwire images, derived from pyproject.toml's ``server`` extra (what the
services need, as compatible ranges) and constraints.txt beside it (the exact versions).

    python images/requirements.py pyproject.toml            # the `server` extra's requirements but pyspark
    python images/requirements.py pyproject.toml --pyspark  # the pyspark version pinned in constraints.txt

pyspark is left out of the images' pip installs: the aggregator image takes it from the official Spark
distribution of the same version (/opt/spark/python), and the gateway never imports it. Everything else is
installed with ``pip install -c constraints.txt -r <this output>``, so the whole resolved set stays pinned.
The ``server`` extra is ``sparkwire[client,gateway,spark]``: those extras are expanded, their requirements
listed once each. Standard library only (tomllib): it runs in the build stage before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PROVIDED_BY_SPARK = "pyspark"
PACKAGE = "sparkwire"
SERVER_EXTRA = "server"
CONSTRAINTS = "constraints.txt"


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _expand(extras: dict[str, list[str]], extra: str, seen: set[str]) -> list[str]:
    """The requirements of ``extra``, with the package's own extras it names (``sparkwire[a,b]``) expanded."""
    out: list[str] = []
    for requirement in extras[extra]:
        if _name(requirement) != PACKAGE:
            out.append(requirement)
            continue
        match = re.fullmatch(r"[A-Za-z0-9._-]+\[([^\]]*)\]\s*", requirement)
        if match is None:
            raise ValueError(f"{requirement!r}: the package may only name its own extras")
        for inner in (e.strip() for e in match.group(1).split(",")):
            if inner not in seen:
                seen.add(inner)
                out += _expand(extras, inner, seen)
    return out


def dependencies(pyproject: Path) -> list[str]:
    """The services' direct dependencies: the ``server`` extra, expanded, each name once (the package's own
    list is empty so that ``sparkwire[client]`` installs no Spark and no Redis)."""
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    unique: dict[str, str] = {}
    for requirement in _expand(extras, SERVER_EXTRA, {SERVER_EXTRA}):
        unique.setdefault(_name(requirement), requirement)
    return list(unique.values())


def runtime_requirements(pyproject: Path) -> list[str]:
    """Every direct dependency except pyspark, as pyproject.toml gives it (constraints.txt pins it)."""
    return [r for r in dependencies(pyproject) if _name(r) != PROVIDED_BY_SPARK]


def pinned(constraints: Path) -> dict[str, str]:
    """constraints.txt's exact versions by normalised name."""
    versions: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, _, version = line.partition("==")
            versions[_name(name)] = version.strip()
    return versions


def pyspark_version(pyproject: Path) -> str:
    """The pyspark version the images carry: constraints.txt's pin (beside pyproject.toml), which must be a
    dependency of the services."""
    if PROVIDED_BY_SPARK not in {_name(r) for r in dependencies(pyproject)}:
        raise ValueError("pyspark is not a dependency of the server extra in pyproject.toml")
    version = pinned(pyproject.parent / CONSTRAINTS).get(PROVIDED_BY_SPARK)
    if version is None:
        raise ValueError(f"pyspark is not pinned with == in {pyproject.parent / CONSTRAINTS}")
    return version


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
