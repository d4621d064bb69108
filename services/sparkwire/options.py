"""Command-line options that also read a matching environment variable.

Every option of every subcommand is declared through :func:`add_option` (a value), :func:`add_flag` (a
boolean: ``--x`` / ``--no-x``) or :func:`add_secret` (only from the environment or a file, never the command
line), so the flag, its environment variable (what the Helm chart sets) and its default live in one place and
can be listed by tests. Conventions: durations in milliseconds, named ``--...-ms``; an invalid value is
reported with the flag (or variable) it came from and what it should be.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

ENV_PREFIX = "SPARKWIRE_"


@dataclass(frozen=True)
class OptionSpec:
    flag: str
    env: str
    default: Any


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


class OptionValueError(argparse.ArgumentTypeError, ValueError):
    """A value an option's type refuses; argparse shows its message after the flag's name."""


def _record(parser: argparse.ArgumentParser, flag: str, env: str, default: Any) -> None:
    specs: list[OptionSpec] = parser.__dict__.setdefault("_sparkwire_specs", [])
    specs.append(OptionSpec(flag=flag, env=env, default=default))


def _from_environment(parser: argparse.ArgumentParser, flag: str, env: str, type: Callable[[str], Any],
                      default: Any) -> Any:
    raw = os.environ.get(env)
    try:
        return type(raw) if raw is not None else default
    except (ValueError, argparse.ArgumentTypeError) as exc:
        parser.error(f"environment variable {env}={raw!r} is not valid for {flag}: {exc}; "
                     f"fix the variable or unset it (default {default!r})")


def add_option(
    parser: argparse.ArgumentParser,
    flag: str,
    *,
    default: Any,
    help: str,
    type: Callable[[str], Any] = str,
) -> None:
    env = env_name(flag)
    value = _from_environment(parser, flag, env, type, default)
    action = parser.add_argument(flag, type=type, default=value, help=f"{help} [env {env}; default {default!r}]")
    _record(parser, action.option_strings[0], env, default)


def add_flag(parser: argparse.ArgumentParser, flag: str, *, default: bool, help: str) -> None:
    """A boolean option: ``--x`` turns it on, ``--no-x`` off; its variable takes true/false, 1/0, yes/no, on/off."""
    env = env_name(flag)
    value = _from_environment(parser, flag, env, parse_bool, default)
    no_flag = "--no-" + flag.removeprefix("--")
    parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=value,
                        help=f"{help} [{flag} / {no_flag}; env {env}=true|false; default {default!r}]")
    _record(parser, flag, env, default)


class _RefusedOnCommandLine(argparse.Action):
    """A secret given as a flag's value: refused, it would show in ``ps`` and the shell's history."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        env = env_name(self.option_strings[0])
        parser.error(f"{option_string} does not take the secret on the command line (every user of the machine "
                     f"sees it in ps): set the environment variable {env}, or pass "
                     f"{self.option_strings[0]}-file PATH (a file holding it, e.g. a mounted Secret)")


def add_secret(parser: argparse.ArgumentParser, flag: str, *, help: str) -> None:
    """A secret, read from the environment variable of ``flag`` or from the file named by ``flag-file``
    (:func:`read_secret` resolves the two); ``flag VALUE`` itself is refused with that advice."""
    env = env_name(flag)
    parser.add_argument(flag, action=_RefusedOnCommandLine, nargs="?", default=os.environ.get(env, ""),
                        help=argparse.SUPPRESS)
    _record(parser, flag, env, "")
    add_option(parser, flag + "-file", default="",
               help=f"a file holding the {help} (one line; a trailing newline is dropped), instead of the "
                    f"environment variable {env}")


class _RenamedInSeconds(argparse.Action):
    """A flag renamed to its ``-ms`` form, still taken in its old unit (seconds), with a warning."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new_flag: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new_flag = new_flag

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        milliseconds = round(float(values) * 1000) if isinstance(values, float) else 0
        print(f"warning: {option_string} is deprecated: use {self.new_flag} {milliseconds} (milliseconds)",
              file=sys.stderr)
        setattr(namespace, self.dest, milliseconds)


def add_renamed_seconds(parser: argparse.ArgumentParser, old_flag: str, new_flag: str) -> None:
    """Keep ``old_flag SECONDS`` working (hidden, deprecated) for ``new_flag MILLISECONDS``."""
    parser.add_argument(old_flag, dest=new_flag.lstrip("-").replace("-", "_"), action=_RenamedInSeconds,
                        type=non_negative_float, new_flag=new_flag, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def read_secret(args: argparse.Namespace, flag: str) -> str:
    """The secret of :func:`add_secret`'s ``flag``: its variable's value or its file's content (not both).
    Exits with a message naming the flag and the fix when the file cannot be read or both are given."""
    dest = flag.lstrip("-").replace("-", "_")
    from_env: str = getattr(args, dest)
    path: str = getattr(args, dest + "_file")
    if not path:
        return from_env
    if from_env:
        _usage_error(f"both {env_name(flag)} and {flag}-file are set: give the secret one way (unset the "
                     f"variable or drop {flag}-file)")
    try:
        return Path(path).read_text().rstrip("\r\n")
    except OSError as exc:
        _usage_error(f"{flag}-file {path}: cannot read it ({exc.strerror}): give a readable file holding the secret")


def _usage_error(text: str) -> NoReturn:
    """Exit 2 (as argparse does for a bad option) with ``text``."""
    print(f"error: {text}", file=sys.stderr)
    raise SystemExit(2)


def option_specs(parser: argparse.ArgumentParser) -> list[OptionSpec]:
    """The options declared on ``parser`` with :func:`add_option`."""
    return list(parser.__dict__.get("_sparkwire_specs", []))


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise OptionValueError(f"expected a whole number, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise OptionValueError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise OptionValueError(f"must be >= 0, got {value}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise OptionValueError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise OptionValueError(f"must be >= 0, got {text}")
    return value


def ratio(text: str) -> float:
    """A share between 0 and 1."""
    value = non_negative_float(text)
    if value > 1:
        raise OptionValueError(f"must be between 0 and 1, got {text}")
    return value


_JVM_MEMORY = re.compile(r"[1-9][0-9]*[kmgt]?", re.IGNORECASE)


def jvm_memory(text: str) -> str:
    """A JVM memory size as Spark takes it (``512m``, ``4g``); empty: left to Spark."""
    if text and not _JVM_MEMORY.fullmatch(text):
        raise OptionValueError(f"expected a size such as 512m or 4g, got {text!r}")
    return text


def parse_bool(text: str) -> bool:
    """``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case), as environment variables are written."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise OptionValueError(f"expected true or false, got {text!r}")
