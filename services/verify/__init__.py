"""Independent checking of exactly-once delivery against expected results."""

from __future__ import annotations

from sparkwire.verify.compare import Report, check_seqs, compare
from sparkwire.verify.expected import WindowResult, expected_results, parse_event, processing_id

__all__ = ["Report", "WindowResult", "check_seqs", "compare", "expected_results", "parse_event",
           "processing_id"]
