"""The ``sparkwire`` command: ``chaos`` comes from the test harness, which only a source checkout installs."""

from __future__ import annotations

import argparse
from importlib.util import find_spec

import pytest

from sparkwire import cli
from sparkwire.spark.main import add_runtime_arguments
from sparkwire.spark.session import QUICK_JIT


def test_chaos_runs_the_harness_when_it_is_installed() -> None:
    from sparkwire_harness.chaos import run as chaos

    args = cli.build_parser().parse_args(["chaos", "--minutes", "1"])
    assert args.run is chaos.run and args.minutes == 1


def test_without_the_harness_chaos_says_where_it_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in an image or after `pip install sparkwire`: every other command still works."""
    monkeypatch.setattr(cli, "find_spec", lambda name: None if name == "sparkwire_harness" else find_spec(name))

    parser = cli.build_parser()
    assert parser.parse_args(["token", "--streams", "metrics"]).command == "token"
    with pytest.raises(SystemExit) as exited:
        cli.main(["chaos"])
    assert "source checkout" in str(exited.value.code) and "make chaos" in str(exited.value.code)


def test_a_streaming_driver_runs_c1_only_and_a_rebuild_the_full_jit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARKWIRE_DRIVER_JAVA_OPTIONS", raising=False)
    parser = cli.build_parser()
    assert parser.parse_args(["aggregate"]).driver_java_options == QUICK_JIT
    assert parser.parse_args(["rebuild"]).driver_java_options == ""  # one big batch job (docs/benchmarks.md)
    assert parser.parse_args(["aggregate", "--driver-java-options="]).driver_java_options == ""
    # A user's job file gets the same two defaults from sparkwire.spark.main.
    run, rebuild = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_runtime_arguments(run)
    add_runtime_arguments(rebuild, java_options="")
    assert (run.parse_args([]).driver_java_options, rebuild.parse_args([]).driver_java_options) == (QUICK_JIT, "")
