"""``python -m sparkwire.examples.large_orders run [--mode realtime|micro-batch]`` (settings from
``LARGE_ORDERS_*``)."""

from __future__ import annotations

import sys

from sparkwire.examples.large_orders.job import main

if __name__ == "__main__":
    sys.exit(main())
