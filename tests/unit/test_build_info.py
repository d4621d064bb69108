"""``sparkwire_build_info``: the gateway and every Spark job's driver say which sparkwire they run."""

from __future__ import annotations

import platform

from prometheus_client import generate_latest

from sparkwire import __version__
from sparkwire.build_info import publish


def test_the_build_info_series_carries_the_version_and_the_component() -> None:
    publish("gateway")
    exposed = generate_latest().decode()
    line = next(line for line in exposed.splitlines()
                if line.startswith("sparkwire_build_info{") and 'component="gateway"' in line)
    assert f'version="{__version__}"' in line and f'python="{platform.python_version()}"' in line
    assert line.endswith(" 1.0")
