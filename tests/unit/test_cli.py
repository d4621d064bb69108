"""The ``sparkwire`` command: every command listed with any extra installed, a missing extra named with the fix;
``chaos`` is the harness's own command (``sparkwire-harness chaos``), not the product's."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path

import pytest

from sparkwire import cli
from sparkwire.spark.runtime.main import add_runtime_arguments
from sparkwire.spark.runtime.session import QUICK_JIT

ROOT = Path(__file__).resolve().parents[2]
# A distribution's import name where it differs from its normalised distribution name.
IMPORT_NAMES = {"pyjwt": "jwt", "prometheus-client": "prometheus_client", "confluent-kafka": "confluent_kafka"}


def _without(monkeypatch: pytest.MonkeyPatch, *absent: str) -> None:
    monkeypatch.setattr(cli, "find_spec", lambda name: None if name in absent else find_spec(name))


def test_chaos_is_the_harness_command_not_the_products() -> None:
    from sparkwire_harness import cli as harness_cli
    from sparkwire_harness.chaos import run as chaos

    args = harness_cli.build_parser().parse_args(["chaos", "--minutes", "1"])
    assert args.run is chaos.run and args.minutes == 1
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["chaos"])


def test_the_checks_name_each_extras_requirements() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, modules in cli.EXTRA_MODULES.items():
        names = {re.split(r"[\[<>=!~ ;]", r)[0].lower() for r in extras[extra]}
        assert {IMPORT_NAMES.get(n, n) for n in names} == set(modules), extra
    assert {c.extra for c in cli.COMMANDS} == set(cli.EXTRA_MODULES)


def test_with_the_client_extra_alone_help_works_and_each_command_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without(monkeypatch, "starlette", "pyspark")
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    listing = capsys.readouterr().out
    assert "gateway" in listing and "needs sparkwire[gateway]" in listing and "needs sparkwire[spark]" in listing
    for command, extra in (("gateway", "gateway"), ("token", "gateway"), ("aggregate", "spark")):
        with pytest.raises(SystemExit) as exited:
            cli.main([command, "--help"])
        message = str(exited.value.code)
        assert f"pip install 'sparkwire[{extra}]'" in message and f"sparkwire {command}:" in message, message


def test_without_pyspark_as_in_the_gateway_image_the_gateway_and_the_producer_run_and_aggregate_names_its_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The gateway image holds every requirement but pyspark; the kind suite's producer Jobs run `sparkwire
    # produce` in it (a CI run failed every one of them when produce asked for the whole spark extra).
    _without(monkeypatch, "pyspark")
    parser = cli.build_parser()
    assert parser.parse_args(["token", "--streams", "metrics"]).command == "token"
    assert parser.parse_args(["gateway"]).run is not None
    assert parser.parse_args(["produce", "--count", "1"]).run is not None
    with pytest.raises(SystemExit) as exited:
        cli.main(["aggregate"])
    assert "pip install 'sparkwire[spark]'" in str(exited.value.code)


def test_without_kafkas_client_produce_names_the_spark_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, "confluent_kafka")
    with pytest.raises(SystemExit) as exited:
        cli.main(["produce", "--count", "1"])
    assert "pip install 'sparkwire[spark]'" in str(exited.value.code) and "confluent_kafka" in str(exited.value.code)


def test_an_unknown_argument_names_the_command_to_ask(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["token", "--no-such-flag"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --no-such-flag (see sparkwire token --help)" in capsys.readouterr().err


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


def test_the_command_being_run_is_the_only_one_imported() -> None:
    # A fresh interpreter: this test process has imported everything already.
    probe = ("import sys; from sparkwire import cli; parser = cli.build_parser(only='gateway'); "
             "assert parser.parse_args(['gateway']).run is not None; "
             "print(sorted(m for m in ('sparkwire.aggregator.job', 'sparkwire.producer.main', 'confluent_kafka', "
             "'sparkwire.gateway.server') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['sparkwire.gateway.server']"


def test_the_chosen_command_is_the_first_argument_not_an_option() -> None:
    assert cli.chosen_command(["--version"]) == ""
    assert cli.chosen_command(["--help", "token", "--streams", "metrics"]) == "token"
    assert cli.chosen_command([]) == ""
    with pytest.raises(SystemExit) as exited:  # listed only, so a typo is argparse's invalid choice
        cli.main(["gatewya"])
    assert exited.value.code == 2
