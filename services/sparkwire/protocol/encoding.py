"""JSON as the protocol writes it: compact, and never NaN or Infinity, which JSON does not have."""

from __future__ import annotations

import json
from typing import NoReturn


class NotJsonError(ValueError):
    """A NaN or Infinity constant: Python's json accepts them, JSON (and a browser's JSON.parse) does not."""


def dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def reject_constant(name: str) -> NoReturn:
    """``parse_constant`` hook of ``json.loads``: refuse NaN and Infinity."""
    raise NotJsonError(f"{name} is not JSON")
