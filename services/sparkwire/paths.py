"""Where a source checkout keeps what ``make setup`` fetched (git-ignored ``.cache/``)."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The sparkwire checkout: the folder holding pyproject.toml above ``services/sparkwire/``."""
    return Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """``$SPARKWIRE_CACHE``, else ``<repo_root>/.cache``."""
    override = os.environ.get("SPARKWIRE_CACHE")
    return Path(override) if override else repo_root() / ".cache"
