"""Type aliases shared by the ``sparkwire.spark`` modules, in one place."""

from __future__ import annotations

from typing import Literal, TypeAlias

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
OutputMode: TypeAlias = Literal["append", "update"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("append", "update")
