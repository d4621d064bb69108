"""Command-line options that also read a matching environment variable.

Every option of every subcommand is declared through :func:`add_option`, so the flag, its environment
variable (what the Helm chart sets) and its default live in one place and can be listed by tests.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "SPARKWIRE_"


@dataclass(frozen=True)
class OptionSpec:
    flag: str
    env: str
    default: Any


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def add_option(
    parser: argparse.ArgumentParser,
    flag: str,
    *,
    default: Any,
    help: str,
    type: Callable[[str], Any] = str,
) -> None:
    env = env_name(flag)
    raw = os.environ.get(env)
    try:
        value = type(raw) if raw is not None else default
    except ValueError as exc:
        parser.error(f"environment variable {env}={raw!r} is not valid for {flag}: {exc}")
    action = parser.add_argument(flag, type=type, default=value, help=f"{help} [env {env}; default {default!r}]")
    specs: list[OptionSpec] = parser.__dict__.setdefault("_sparkwire_specs", [])
    specs.append(OptionSpec(flag=action.option_strings[0], env=env, default=default))


def option_specs(parser: argparse.ArgumentParser) -> list[OptionSpec]:
    """The options declared on ``parser`` with :func:`add_option`."""
    return list(parser.__dict__.get("_sparkwire_specs", []))


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0, got {value}")
    return value


_JVM_MEMORY = re.compile(r"[1-9][0-9]*[kmgt]?", re.IGNORECASE)


def jvm_memory(text: str) -> str:
    """A JVM memory size as Spark takes it (``512m``, ``4g``); empty: left to Spark."""
    if text and not _JVM_MEMORY.fullmatch(text):
        raise ValueError(f"expected a size such as 512m or 4g, got {text!r}")
    return text


def parse_bool(text: str) -> bool:
    """``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case), as environment variables are written."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
