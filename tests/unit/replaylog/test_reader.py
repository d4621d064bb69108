from __future__ import annotations

from sparkwire.replaylog.reader import entry_id, parse_entry, parse_meta, parse_state


def test_entry_seq_comes_from_its_id() -> None:
    entry = parse_entry(b"42-0", {b"pid": b"p", b"key": b"k", b"data": b"{}", b"ts": b"17", b"batch": b"3"})
    assert (entry.seq, entry.processing_id, entry.key, entry.commit_ms, entry.batch_id) == (42, "p", "k", 17, 3)
    assert entry_id(42) == "42-0"


def test_meta_of_an_empty_stream_has_no_epoch_and_seq_zero() -> None:
    meta = parse_meta({})
    assert (meta.epoch, meta.last_seq, meta.first_seq, meta.last_batch) == ("", 0, 1, -1)


def test_meta_counters_are_the_fields_that_are_not_positions() -> None:
    meta = parse_meta({b"epoch": b"e1", b"last_seq": b"9", b"duplicates_suppressed": b"2"})
    assert meta.counters == {"duplicates_suppressed": 2}
    assert meta.last_seq == 9


def test_state_values_decode_to_seq_id_and_data() -> None:
    state = parse_state({b"cpu": b'{"seq":5,"processingId":"abc","data":{"avg":1.5}}'})
    assert state["cpu"].seq == 5
    assert state["cpu"].data == {"avg": 1.5}
