from __future__ import annotations

import argparse

import pytest

from sparkwire.cli import build_parser
from sparkwire.options import add_option, env_name, jvm_memory, option_specs, positive_int


def test_an_environment_variable_sets_the_default_and_a_flag_overrides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKWIRE_CHUNK_SIZE", "7")
    parser = argparse.ArgumentParser()
    add_option(parser, "--chunk-size", type=positive_int, default=500, help="h")
    assert parser.parse_args([]).chunk_size == 7
    assert parser.parse_args(["--chunk-size", "9"]).chunk_size == 9


def test_a_bad_environment_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPARKWIRE_CHUNK_SIZE", "0")
    with pytest.raises(SystemExit):
        add_option(argparse.ArgumentParser(), "--chunk-size", type=positive_int, default=500, help="h")
    assert "SPARKWIRE_CHUNK_SIZE='0' is not valid for --chunk-size" in capsys.readouterr().err


def test_every_subcommand_option_is_listed_with_its_environment_variable() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    aggregate = option_specs(subparsers.choices["aggregate"])
    assert {s.env for s in aggregate} >= {"SPARKWIRE_REDIS_URL", "SPARKWIRE_CHECKPOINT", "SPARKWIRE_WINDOW_MS"}
    assert all(s.env == env_name(s.flag) for s in aggregate)


@pytest.mark.parametrize("size", ["", "512m", "4g", "4G", "1048576k", "2t", "1073741824"])
def test_a_jvm_memory_size_is_taken_as_spark_writes_it(size: str) -> None:
    assert jvm_memory(size) == size


@pytest.mark.parametrize("size", ["4 GB", "4gb", "0g", "-1g", "g", "1.5g"])
def test_a_jvm_memory_size_spark_would_refuse_is_a_clear_error(size: str) -> None:
    with pytest.raises(ValueError, match="512m or 4g"):
        jvm_memory(size)
