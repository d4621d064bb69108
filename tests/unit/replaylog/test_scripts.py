from __future__ import annotations

import re
from pathlib import Path

import pytest

import sparkwire.replaylog
from sparkwire.replaylog import scripts
from sparkwire.replaylog.scripts import script_source

LUA = Path(sparkwire.replaylog.__file__).parent / "lua"
FRAGMENTS = {"fence.lua", "commit.lua"}
SCRIPTS = sorted(path.name for path in LUA.glob("*.lua") if path.name not in FRAGMENTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_loaded_script_has_its_fragments_written_out(name: str) -> None:
    raw, loaded = (LUA / name).read_text(), script_source(name)
    included = re.findall(r"^--@include (\S+)$", raw, re.MULTILINE)
    assert not re.search(r"^--@include", loaded, re.MULTILINE)
    for fragment in included:
        assert (LUA / fragment).read_text().rstrip("\n") in loaded
    if not included:
        assert loaded == raw


def test_the_writing_scripts_share_the_fence_and_the_commits_share_their_end() -> None:
    for name in ("publish_batch.lua", "stage_chunk.lua", "commit_rows.lua"):
        assert "return unchanged('fenced')" in script_source(name)
    for name in ("publish_batch.lua", "commit_rows.lua"):
        assert "local function count_and_trim(" in script_source(name)


def test_a_fragment_that_includes_another_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {"outer.lua": "--@include inner.lua\n", "inner.lua": "--@include other.lua\n"}
    monkeypatch.setattr(scripts, "_text", texts.__getitem__)
    with pytest.raises(ValueError, match="cannot include"):
        script_source.__wrapped__("outer.lua")


@pytest.mark.parametrize("name", sorted(FRAGMENTS))
def test_a_fragment_names_the_keys_and_args_it_uses(name: str) -> None:
    header = (LUA / name).read_text().split("\n\n", 1)[0]
    assert "KEYS[" in header and "ARGV" in header
