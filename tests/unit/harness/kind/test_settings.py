"""The chart's names derived from the release name, and kind's node names from the context."""

from __future__ import annotations

from sparkwire_harness.kind import settings


def test_the_fullname_is_the_release_name_when_it_says_sparkwire() -> None:
    assert settings.chart_fullname("sparkwire") == "sparkwire"
    assert settings.chart_fullname("my-sparkwire") == "my-sparkwire"
    assert settings.chart_fullname("prod") == "prod-sparkwire"


def test_kinds_control_plane_is_named_after_the_cluster() -> None:
    assert settings.control_plane("kind-sparkwire") == "sparkwire-control-plane"
    assert settings.control_plane("other") == "other-control-plane"


def test_the_files_it_names_are_in_the_checkout() -> None:
    assert (settings.CHART / "Chart.yaml").is_file()
    assert settings.KIND_VALUES.is_file() and settings.E2E_VALUES.is_file()
