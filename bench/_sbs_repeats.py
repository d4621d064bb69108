"""Repeats of the side-by-side benchmark, pure: the servers' order in each pass, and what the report makes of
several repeats of one row: the median of a figure, the spread (min-max) of its ratio to the peer over the
repeats (each repeat's value over the peer's in the same repeat), whether every repeat was exactly once, and
an aim's verdict, met only when every repeat meets it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar


class Repeated(Protocol):
    @property
    def repeat(self) -> int: ...


T = TypeVar("T")
R = TypeVar("R", bound=Repeated)
K = TypeVar("K", bound=Hashable)


def run_order(servers: Sequence[str], repeat: int, index: int = 0) -> list[str]:
    """The servers in the order they run for the ``index``-th client count (or the SIGKILL test) of pass
    ``repeat`` (0, 1, ...): rotated by one more per count and per repeat, so over as many repeats as there
    are servers each server runs first once and last once at every client count."""
    if not servers:
        return []
    shift = (repeat + index) % len(servers)
    return [*servers[shift:], *servers[:shift]]


def group(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """``items`` by ``key``, in the order each key first appears (and each list in the items' order)."""
    out: dict[K, list[T]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


def finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def median(values: Iterable[float]) -> float:
    """The median of the finite values (a repeat that measured nothing is left out); NaN when none is."""
    kept = finite(values)
    return float(statistics.median(kept)) if kept else float("nan")


def by_repeat(items: Iterable[R], value: Callable[[R], float]) -> dict[int, float]:
    return {item.repeat: value(item) for item in items}


def paired_ratios(values: Mapping[int, float], peer: Mapping[int, float]) -> list[float]:
    """Each repeat's value over the peer's in the same repeat (keys: repeat numbers), in repeat order;
    a repeat where either is missing or not finite, or the peer's is 0, is left out."""
    out = []
    for repeat in sorted(values.keys() & peer.keys()):
        value, base = values[repeat], peer[repeat]
        if math.isfinite(value) and math.isfinite(base) and base:
            out.append(value / base)
    return out


def spread(values: Sequence[float], digits: int = 2, unit: str = "") -> str:
    """``min-max`` of ``values`` (``unit`` after both); empty when they all read the same at ``digits`` (one
    repeat, or the peer against itself) or there are none."""
    kept = finite(values)
    if not kept:
        return ""
    lo, hi = f"{min(kept):,.{digits}f}", f"{max(kept):,.{digits}f}"
    return "" if lo == hi else f"{lo}-{hi}{unit}"


def ratio_summary(ratios: Sequence[float]) -> str:
    """``0.96x, 0.91-1.02x``: the median of the repeats' ratios and their spread; ``1.00x`` when they all
    read the same; empty when no repeat has a ratio."""
    if not finite(ratios):
        return ""
    rng = spread(ratios, 2, "x")
    return f"{median(ratios):.2f}x" + (f", {rng}" if rng else "")


def median_range(values: Sequence[float], digits: int = 1, unit: str = "") -> str:
    """``22.8 ms (21.0-24.1 ms)``: the median and the spread of a figure over the repeats."""
    if not finite(values):
        return "n/a"
    rng = spread(values, digits, unit)
    return f"{median(values):,.{digits}f}{unit}" + (f" ({rng})" if rng else "")


def once_text(failures: Sequence[tuple[int, str | None]]) -> str:
    """The exactly-once cell of a row from each repeat's (repeat number, None if exactly once, else why
    not): ``yes, 3 of 3`` only when every repeat was; else how many were not, and why."""
    bad = [(repeat, why) for repeat, why in failures if why is not None]
    if not bad:
        return f"yes, {len(failures)} of {len(failures)}"
    return (f"**no** in {len(bad)} of {len(failures)}: "
            + "; ".join(f"repeat {repeat}: {why}" for repeat, why in sorted(bad)))


def verdict(oks: Sequence[bool]) -> str:
    """An aim over the repeats: met only when every repeat meets it."""
    if not oks:
        return "not measured"
    met = sum(oks)
    if met == len(oks):
        return f"**met** in {met} of {len(oks)} repeats"
    return f"**not met** in {len(oks) - met} of {len(oks)} repeats (met in {met})"


def per_repeat(rows: Sequence[R], ok: Callable[[R], bool]) -> list[bool]:
    """For each repeat with rows (in repeat order), whether all its rows meet ``ok``."""
    repeats = sorted({row.repeat for row in rows})
    return [all(ok(row) for row in rows if row.repeat == repeat) for repeat in repeats]
