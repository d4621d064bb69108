"""Progress lines (``[kind HH:MM:SS] …``): the kind tests take minutes, and a silent terminal looks like a
hang. Shown while the test runs, also when pytest captures output (then they are in the failure report as
well), once the suite's conftest has attached pytest's configuration."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

_config: pytest.Config | None = None
_lock = threading.Lock()


def attach(config: pytest.Config | None) -> None:
    """pytest's configuration (``pytest_configure``), whose capture manager the lines get past."""
    global _config
    _config = config


def line(message: str, clock: str | None = None) -> str:
    return f"[kind {clock or time.strftime('%H:%M:%S')}] {message}"


def progress(message: str) -> None:
    shown = line(message)
    capture = _config.pluginmanager.getplugin("capturemanager") if _config is not None else None
    with _lock:
        if capture is not None and capture.is_capturing():
            with capture.global_and_fixture_disabled():
                print(shown, flush=True)
        print(shown, flush=True)
