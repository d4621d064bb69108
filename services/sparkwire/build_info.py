"""``sparkwire_build_info``: which sparkwire a process runs, as Prometheus's ``*_build_info`` convention has it (a
series of value 1 whose labels carry the version), exported by the gateway and by every Spark job's driver."""

from __future__ import annotations

import platform

from prometheus_client import Info

from sparkwire import __version__

BUILD_INFO = Info(
    "sparkwire_build", "The sparkwire this process runs: version, component (gateway, spark-job) and Python",
    ["component"],
)


def publish(component: str) -> None:
    """Set this process's ``sparkwire_build_info{component=...,version=...,python=...} 1``."""
    BUILD_INFO.labels(component=component).info({"version": __version__, "python": platform.python_version()})
