from __future__ import annotations

from sparkwire.client.gaps import SeqGapDetector


def test_gap_detector_applies_in_order_drops_repeats_and_holds_at_a_gap() -> None:
    detector = SeqGapDetector(after_seq=4)
    verdicts = [detector.observe(s) for s in (5, 6, 6, 3, 9, 7)]
    assert verdicts == ["next", "next", "duplicate", "duplicate", "gap", "next"]
    assert (detector.last_seq, detector.duplicates, detector.gaps) == (7, 2, 1)
    detector.reset(100)
    assert detector.observe(101) == "next"
    assert (detector.duplicates, detector.gaps) == (2, 1)
