from __future__ import annotations

from pathlib import Path

import pytest

import sparkwire.replaylog
from sparkwire.replaylog import InvalidStreamName, StreamKeys
from sparkwire.replaylog.keys import LogField, MetaField


def test_every_key_of_a_stream_shares_one_hash_tag() -> None:
    keys = StreamKeys("metrics")
    tags = {k[k.index("{") : k.index("}") + 1] for k in keys.all()}
    assert tags == {"{metrics}"}
    assert len(set(keys.all())) == 4
    assert keys.staging.startswith("sparkwire:{metrics}:") and keys.staging not in keys.all()


@pytest.mark.parametrize("name", ["", "a{b}", "with space", "x" * 65, "slash/name"])
def test_names_that_would_break_the_hash_tag_are_refused(name: str) -> None:
    with pytest.raises(InvalidStreamName):
        StreamKeys(name)


def test_the_commit_script_writes_the_field_names_the_readers_use() -> None:
    script = (Path(sparkwire.replaylog.__file__).parent / "lua" / "publish_batch.lua").read_text()
    for field in [*LogField, *MetaField]:
        assert f"'{field}'" in script, f"publish_batch.lua does not write {field!r}"
