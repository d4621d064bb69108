"""Independent checking of exactly-once delivery against expected results."""

from __future__ import annotations

from sparkwire_harness.verify.compare import Report, check_seqs, compare
from sparkwire_harness.verify.expected import (
    Outcome,
    WindowResult,
    expected_outcome,
    expected_results,
    parse_event,
    parse_heartbeat,
    processing_id,
)
from sparkwire_harness.verify.lateness import AmbiguousLateness

__all__ = ["AmbiguousLateness", "Outcome", "Report", "WindowResult", "check_seqs", "compare", "expected_outcome",
           "expected_results", "parse_event", "parse_heartbeat", "processing_id"]
