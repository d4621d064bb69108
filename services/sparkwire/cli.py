"""The ``sparkwire`` command: one subcommand per service."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.util import find_spec

from sparkwire import __version__

Runner = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    from sparkwire.aggregator import job
    from sparkwire.gateway import main as gateway
    from sparkwire.gateway import token_cli
    from sparkwire.producer import main as producer

    parser = argparse.ArgumentParser(
        prog="sparkwire",
        description="Exactly-once delivery of Spark Structured Streaming results to browsers.",
    )
    parser.add_argument("--version", action="version", version=f"sparkwire {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    aggregate = commands.add_parser(
        "aggregate", help="run the Spark job: Kafka events -> windowed results -> replay log",
        description=job.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    job.add_arguments(aggregate)
    aggregate.set_defaults(run=job.run)

    from sparkwire.spark import rebuild

    rebuild_log = commands.add_parser(
        "rebuild", help="recompute the metrics stream's lost replay log from Kafka and the aggregator's checkpoint",
        description=rebuild.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    job.add_rebuild_arguments(rebuild_log)
    rebuild_log.set_defaults(run=job.run_rebuild)

    produce = commands.add_parser(
        "produce", help="write raw metric events to Kafka (idempotent producer)",
        description=producer.__doc__,
    )
    producer.add_arguments(produce)
    produce.set_defaults(run=producer.run)

    serve = commands.add_parser(
        "gateway", help="serve replay logs to WebSocket clients (one stateless pod)",
        description=gateway.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gateway.add_arguments(serve)
    serve.set_defaults(run=gateway.run)

    token = commands.add_parser(
        "token", help="print a client token (JWT) signed with the gateways' secret",
        description=token_cli.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    token_cli.add_arguments(token)
    token.set_defaults(run=token_cli.run)

    chaos_help = "the whole pipeline on this machine under a seeded fault schedule, checked exactly once"
    if find_spec("sparkwire_harness") is None:  # an image, `pip install sparkwire`: it comes with a checkout
        chaos_run = commands.add_parser("chaos", help=chaos_help + " (needs a source checkout)", add_help=False)
        chaos_run.set_defaults(run=_no_harness)
        return parser
    from sparkwire_harness.chaos import run as chaos

    chaos_run = commands.add_parser("chaos", help=chaos_help, description=chaos.__doc__)
    chaos.add_arguments(chaos_run)
    chaos_run.set_defaults(run=chaos.run)
    return parser


def _no_harness(_args: argparse.Namespace) -> int:
    sys.exit("sparkwire chaos: the test harness (sparkwire_harness) is not installed; it comes with a source "
             "checkout of sparkwire: `make setup`, then `make chaos`")


def main(argv: Sequence[str] | None = None) -> None:
    try:
        parser = build_parser()
    except ModuleNotFoundError as missing:
        # `pip install 'sparkwire[client]'` installs the client alone: the services' dependencies are absent.
        sys.exit(f"sparkwire: the services are not installed ({missing}): pip install 'sparkwire[server]'")
    args = parser.parse_args(argv)
    runner: Runner = args.run
    sys.exit(runner(args))


if __name__ == "__main__":
    main()
