"""``sparkwire-harness``: the test harness's own command (not the product's ``sparkwire``).

    sparkwire-harness chaos [--minutes 10 --seed 7 ...]   (make chaos; also python -m sparkwire_harness chaos)

Installed with a source checkout (``make setup``: ``pip install -e ./harness``), never into an image.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from sparkwire import __version__

Runner = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    from sparkwire_harness.chaos import run as chaos

    parser = argparse.ArgumentParser(prog="sparkwire-harness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"sparkwire-harness (sparkwire {__version__})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chaos_run = commands.add_parser(
        "chaos", help="the whole pipeline on this machine under a seeded fault schedule, checked exactly once",
        description=chaos.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chaos.add_arguments(chaos_run)
    chaos_run.set_defaults(run=chaos.run)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    runner: Runner = args.run
    sys.exit(runner(args))


if __name__ == "__main__":
    main()
