"""The PySpark Structured Streaming aggregator (``sparkwire aggregate``)."""

from __future__ import annotations
