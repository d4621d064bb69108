"""Independent checking of exactly-once delivery against expected results."""

from __future__ import annotations

from sparkwire_harness.verify.compare import Report, check_seqs, compare
from sparkwire_harness.verify.expected import (
    Outcome,
    Produced,
    WindowResult,
    expected_outcome,
    expected_results,
    parse_event,
    parse_heartbeat,
    processing_id,
)
from sparkwire_harness.verify.lateness import AmbiguousLateness
from sparkwire_harness.verify.produced import ProducedLine, oracle_input, read_produced

__all__ = [
    "AmbiguousLateness", "Outcome", "Produced", "ProducedLine", "Report", "WindowResult", "check_seqs", "compare",
    "expected_outcome", "expected_results", "oracle_input", "parse_event", "parse_heartbeat", "processing_id",
    "read_produced",
]
