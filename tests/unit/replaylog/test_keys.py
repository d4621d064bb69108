from __future__ import annotations

import pytest

from sparkwire.replaylog import InvalidStreamName, StreamKeys


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
