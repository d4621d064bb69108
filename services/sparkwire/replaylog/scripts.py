"""The log's Lua scripts as Redis runs them: each ``lua/<name>.lua`` with its ``--@include <fragment>.lua``
lines replaced by the fragment's text.

Redis runs a script as one self-contained text (no ``require``), so the steps several scripts take alike
(the fence check, a commit's counters and trim) are written once as fragments and put into each script here,
when it is loaded: the script that runs is the same text as if the fragment were written out in it.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r"^--@include (?P<fragment>[a-z_]+\.lua)$", re.MULTILINE)


def _text(name: str) -> str:
    return resources.files("sparkwire.replaylog").joinpath("lua", name).read_text()


@cache
def script_source(name: str) -> str:
    """The text of ``lua/<name>`` with every include line replaced by its fragment (fragments include none:
    one level keeps what runs easy to read off the files)."""

    def fragment(match: re.Match[str]) -> str:
        text = _text(match["fragment"])
        if _INCLUDE.search(text):
            raise ValueError(f"{match['fragment']}: a fragment cannot include another one")
        return text.rstrip("\n")

    return _INCLUDE.sub(fragment, _text(name))
