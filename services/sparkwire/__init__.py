"""sparkwire: exactly-once delivery of Spark Structured Streaming results to browsers."""

from __future__ import annotations

__version__ = "0.1.0"
