from __future__ import annotations

import argparse
import re
from pathlib import Path

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


# --- conventions: --x/--no-x booleans, durations in ms, secrets never as a flag's value, errors name the fix ---


def test_a_boolean_is_turned_on_and_off_by_flags_and_set_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkwire.options import add_flag

    parser = argparse.ArgumentParser()
    add_flag(parser, "--realtime", default=False, help="h")
    assert parser.parse_args([]).realtime is False
    assert parser.parse_args(["--realtime"]).realtime is True
    assert parser.parse_args(["--realtime", "--no-realtime"]).realtime is False
    monkeypatch.setenv("SPARKWIRE_REALTIME", "true")
    on = argparse.ArgumentParser()
    add_flag(on, "--realtime", default=False, help="h")
    assert on.parse_args([]).realtime is True and on.parse_args(["--no-realtime"]).realtime is False
    assert "--realtime, --no-realtime" in on.format_help()


def test_a_bad_boolean_variable_names_the_variable_the_flag_and_the_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparkwire.options import add_flag

    monkeypatch.setenv("SPARKWIRE_REALTIME", "maybe")
    with pytest.raises(SystemExit):
        add_flag(argparse.ArgumentParser(), "--realtime", default=False, help="h")
    err = capsys.readouterr().err
    assert "SPARKWIRE_REALTIME='maybe' is not valid for --realtime: expected true or false" in err
    assert "fix the variable or unset it" in err


def test_a_bad_value_names_the_flag_and_what_it_must_be(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_option(parser, "--chunk-size", type=positive_int, default=500, help="h")
    for bad, expected in (("0", "argument --chunk-size: must be >= 1, got 0"),
                          ("ten", "argument --chunk-size: expected a whole number, got 'ten'")):
        with pytest.raises(SystemExit):
            parser.parse_args(["--chunk-size", bad])
        assert expected in capsys.readouterr().err


def test_a_secret_is_refused_as_a_flags_value_and_read_from_the_environment_or_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from sparkwire.options import add_secret, read_secret

    def parser() -> argparse.ArgumentParser:
        made = argparse.ArgumentParser()
        add_secret(made, "--auth-secret", help="token secret")
        return made

    monkeypatch.delenv("SPARKWIRE_AUTH_SECRET", raising=False)
    with pytest.raises(SystemExit):
        parser().parse_args(["--auth-secret", "s3cret"])
    err = capsys.readouterr().err
    assert "--auth-secret does not take the secret on the command line" in err
    assert "SPARKWIRE_AUTH_SECRET" in err and "--auth-secret-file PATH" in err
    assert "--auth-secret " not in parser().format_help().replace("--auth-secret-file", "")  # hidden
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-a-file\n")
    assert read_secret(parser().parse_args(["--auth-secret-file", str(secret_file)]), "--auth-secret") == "from-a-file"
    monkeypatch.setenv("SPARKWIRE_AUTH_SECRET", "from-the-environment")
    assert read_secret(parser().parse_args([]), "--auth-secret") == "from-the-environment"
    with pytest.raises(SystemExit) as exited:
        read_secret(parser().parse_args(["--auth-secret-file", str(secret_file)]), "--auth-secret")
    assert exited.value.code == 2
    assert "both SPARKWIRE_AUTH_SECRET and --auth-secret-file are set" in capsys.readouterr().err


def test_a_flag_renamed_to_milliseconds_keeps_its_old_spelling_in_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    from sparkwire.options import add_renamed_seconds

    parser = argparse.ArgumentParser()
    add_option(parser, "--drain-ms", type=positive_int, default=10_000, help="h")
    add_renamed_seconds(parser, "--drain-seconds", "--drain-ms")
    assert parser.parse_args([]).drain_ms == 10_000
    assert parser.parse_args(["--drain-ms", "2500"]).drain_ms == 2500
    assert parser.parse_args(["--drain-seconds", "1.5"]).drain_ms == 1500
    assert "--drain-seconds is deprecated: use --drain-ms 1500" in capsys.readouterr().err
    assert "--drain-seconds" not in parser.format_help()


def test_every_duration_option_is_in_milliseconds() -> None:
    """One unit convention: a duration is an ``-ms`` option (and epoch times ``--start-ms``)."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {spec.flag for command in subparsers.choices.values() for spec in option_specs(command)}
    assert not {f for f in flags if re.search(r"seconds|-s$|minutes|--ttl$|--duration$|--timeout$", f)}
    assert {"--session-ttl-ms", "--drain-ms", "--idle-ms", "--duration-ms", "--ttl-ms"} <= flags
