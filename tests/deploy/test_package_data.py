"""Every file a service reads at run time is installed with the package (the images pip-install it):
the package-data globs of pyproject.toml cover every file under the packages' data folders."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA_FOLDERS = {"sparkwire.gateway": "static", "sparkwire.replaylog": "lua"}


@pytest.mark.parametrize(("package", "folder"), sorted(DATA_FOLDERS.items()))
def test_package_data_globs_cover_every_data_file(package: str, folder: str) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    source = ROOT / config["packages"]["find"]["where"][0] / package.replace(".", "/")
    covered = {path for pattern in config["package-data"][package] for path in source.glob(pattern) if path.is_file()}
    present = {path for path in (source / folder).rglob("*") if path.is_file()}
    assert present - covered == set(), "not installed with the package: add a package-data glob in pyproject.toml"


def test_the_browser_client_the_gateway_serves_is_installed() -> None:
    """The gateway serves /static/sparkwire-client.js from the client's npm package folder (client/js), whose
    node_modules and tests are not installed: the module and its declarations are."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    source = ROOT / config["packages"]["find"]["where"][0] / "sparkwire" / "client"
    covered = {path.name for pattern in config["package-data"]["sparkwire.client"] for path in source.glob(pattern)}
    assert covered == {"sparkwire-client.js", "sparkwire-client.d.ts"}
