"""The SparkApplication's mainApplicationFile (``local:///opt/sparkwire/aggregate.py``).

spark-submit runs a Python file, not a console script: this one runs ``sparkwire aggregate`` with the
arguments the SparkApplication passes (every option also reads its ``SPARKWIRE_*`` environment variable).
``main`` exits with the job's status, non-zero when a query stops by itself, so the driver pod fails and
the operator's restart policy starts a new driver on the same checkpoint.
"""

from __future__ import annotations

import sys

from sparkwire.cli import main

if __name__ == "__main__":
    main(["aggregate", *sys.argv[1:]])
