"""``python -m sparkwire.examples.orders run|rebuild``: the orders job (settings from ``ORDERS_*``)."""

from __future__ import annotations

import sys

from sparkwire.examples.orders.job import job_from_environment
from sparkwire.spark import main

if __name__ == "__main__":
    sys.exit(main(job_from_environment()))
