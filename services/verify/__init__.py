"""Independent checking of exactly-once delivery against expected results."""

from __future__ import annotations

from sparkwire.verify.compare import Report, check_seqs, compare
from sparkwire.verify.expected import (
    Outcome,
    WindowResult,
    expected_outcome,
    expected_results,
    parse_event,
    parse_heartbeat,
    processing_id,
)
from sparkwire.verify.lateness import AmbiguousLateness

__all__ = ["AmbiguousLateness", "Outcome", "Report", "WindowResult", "check_seqs", "compare", "expected_outcome",
           "expected_results", "parse_event", "parse_heartbeat", "processing_id"]
