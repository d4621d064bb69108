"""``sparkwire-harness``: the test harness's own command (not the product's ``sparkwire``).

    sparkwire-harness chaos [--minutes 10 --seed 7 ...]   (make chaos; also python -m sparkwire_harness chaos)

Installed with a source checkout (``make setup``: ``pip install -e ./harness``), never into an image.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sparkwire import __version__
from sparkwire.cli import add_command, run_command


def build_parser() -> argparse.ArgumentParser:
    from sparkwire_harness.chaos import run as chaos

    parser = argparse.ArgumentParser(prog="sparkwire-harness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"sparkwire-harness (sparkwire {__version__})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_command(commands, "chaos", "the whole pipeline on this machine under a seeded fault schedule, checked exactly "
                "once", chaos, description=chaos.__doc__)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    main()
