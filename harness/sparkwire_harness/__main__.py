"""``python -m sparkwire_harness``: the same as the ``sparkwire-harness`` command."""

from sparkwire_harness.cli import main

main()
