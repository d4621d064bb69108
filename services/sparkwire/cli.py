"""The ``sparkwire`` command: one subcommand per service.

Each command needs one extra of the package (pyproject.toml): ``gateway`` and ``token`` the ``gateway`` extra,
``aggregate``, ``rebuild`` and ``produce`` the ``spark`` extra (``server`` has both). ``sparkwire --help``
works with any extra installed (the client's alone too); a command whose extra is missing is still listed,
and running it says which extra to install instead of failing on an import.

Only the command being run is imported (with its arguments); the others are listed by name and help. A
gateway pod's process so does not load the Spark job's modules or Kafka's client (~0.1 s of CPU and 4 MB less
at each start, measured here; tests/unit/test_cli.py checks what it imports).

The test harness's ``chaos`` run is not a product command: ``sparkwire-harness chaos`` (``make chaos``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from types import ModuleType
from typing import NoReturn

from sparkwire import __version__

Runner = Callable[[argparse.Namespace], int]

# The top-level modules each extra installs (the names its requirements import as), checked before a command's
# own module is imported; tests/unit/test_cli.py checks them against pyproject.toml's extras.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "gateway": ("starlette", "uvicorn", "websockets", "redis", "prometheus_client", "jwt", "tenacity"),
    "spark": ("pyspark", "confluent_kafka", "redis", "prometheus_client", "tenacity"),
}


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    extra: str
    module: str  # defines add_arguments(parser) and run(args), or the attributes below
    add_arguments: str = "add_arguments"
    run: str = "run"
    doc_module: str = ""  # the module whose docstring describes the command (default: ``module``)
    # The top-level modules the command itself imports, when fewer than its extra's: `produce` needs Kafka's
    # client, not pyspark, and runs in the gateway image (the kind suite's producer Jobs), which has no pyspark.
    needs: tuple[str, ...] = ()


COMMANDS = (
    Command("aggregate", "run the Spark job: Kafka events -> windowed results -> replay log", "spark",
            "sparkwire.aggregator.job"),
    Command("rebuild", "recompute the metrics stream's lost replay log from Kafka and the aggregator's checkpoint",
            "spark", "sparkwire.aggregator.job", add_arguments="add_rebuild_arguments", run="run_rebuild",
            doc_module="sparkwire.spark.rebuild.rebuilder"),
    Command("produce", "write raw metric events to Kafka (idempotent producer)", "spark", "sparkwire.producer.main",
            needs=("confluent_kafka",)),
    Command("gateway", "serve replay logs to WebSocket clients (one stateless pod)", "gateway",
            "sparkwire.gateway.server"),
    Command("token", "print a client token (JWT) signed with the gateways' secret", "gateway",
            "sparkwire.gateway.auth.token_cli"),
)


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ImportError:  # an import hook that refuses it
        return False


def missing_modules(extra: str, needs: Sequence[str] = ()) -> list[str]:
    """The modules of ``extra`` (or only ``needs``, when given) that are not installed here."""
    return [name for name in (needs or EXTRA_MODULES[extra]) if not _installed(name)]


def install_hint(command: str, extra: str, missing: Sequence[str]) -> str:
    return (f"sparkwire {command}: needs the '{extra}' extra, which is not installed here (missing: "
            f"{', '.join(missing)}); install it with: pip install 'sparkwire[{extra}]' "
            "(or 'sparkwire[server]' for every command)")


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str,
                module: ModuleType, *, description: str | None = None, add_arguments: str = "add_arguments",
                run: str = "run") -> None:
    """A subcommand whose arguments and runner ``module`` defines (``add_arguments(parser)``, ``run(args)``), its
    ``description`` (a module docstring) shown as written. Also the harness's command (sparkwire_harness/cli.py)."""
    parser = commands.add_parser(name, help=help, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    getattr(module, add_arguments)(parser)
    parser.set_defaults(run=getattr(module, run))


def run_command(args: argparse.Namespace) -> NoReturn:
    """Exit with what the chosen subcommand's runner returns."""
    runner: Runner = args.run
    sys.exit(runner(args))


def _add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], command: Command, *,
                 load: bool) -> None:
    """``command`` with its arguments and runner when ``load``; else (or when its extra is missing) listed only."""
    missing = missing_modules(command.extra, command.needs)
    if not missing and not load:
        commands.add_parser(command.name, help=command.help, add_help=False)
        return
    if not missing:
        try:
            module = import_module(command.module)
            doc = import_module(command.doc_module).__doc__ if command.doc_module else module.__doc__
        except ModuleNotFoundError as error:  # a dependency of the extra that is not one of its top-level names
            missing = [error.name or str(error)]
        else:
            add_command(commands, command.name, command.help, module, description=doc,
                        add_arguments=command.add_arguments, run=command.run)
            return
    # Listed, so `sparkwire --help` shows it; any arguments (--help included) get the install hint.
    stub = commands.add_parser(command.name, help=f"{command.help} (needs sparkwire[{command.extra}])",
                               add_help=False)
    stub.set_defaults(run=None, missing_extra=install_hint(command.name, command.extra, missing))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command with its arguments, or only the command named ``only`` (``main`` passes the one being run:
    its module alone is imported) and the others listed."""
    parser = argparse.ArgumentParser(
        prog="sparkwire",
        description="Exactly-once delivery of Spark Structured Streaming results to browsers.",
        epilog="Each command needs an extra of the package: gateway, token: sparkwire[gateway]; aggregate, "
               "rebuild, produce: sparkwire[spark]; all of them: sparkwire[server].",
    )
    parser.add_argument("--version", action="version", version=f"sparkwire {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        _add_command(commands, command, load=only is None or command.name == only)
    return parser


def chosen_command(argv: Sequence[str]) -> str:
    """The command ``argv`` names: its first argument that is not an option (the top level takes only ``--help``
    and ``--version``, neither with a value); "" for none."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=chosen_command(argv))
    args, unknown = parser.parse_known_args(argv)
    hint: str | None = getattr(args, "missing_extra", None)
    if hint is not None:
        sys.exit(hint)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (see sparkwire {args.command} --help)")
    run_command(args)


if __name__ == "__main__":
    main()
