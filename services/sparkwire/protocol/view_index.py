"""Which of a pod's views deliver each entry of a run, in one pass over the run (``items_by_view``).

Matching every entry of a batch against every view a pod holds costs entries x views matcher calls: with
10,000 clients over 1,000 tenants' filters, a batch of 1,000 entries was a million calls, longer than the
gap between batches, and every filtered client fell behind for good. Most filters ask a field to equal one
of a few values (a tenant, a region, a key): each view is filed under its ``CompiledView.equality`` values,
each entry looks its own value there up, and only the views found are asked (their full match decides).
A view with no equality is asked about every entry, as before. The items are those ``view_items`` gives
each view alone; ``tests/unit/protocol/test_view_index.py`` holds the two equal on random filters and data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from sparkwire.protocol.filter_form import KEY_FIELD, Value, tag
from sparkwire.protocol.items import Entry
from sparkwire.protocol.view_feed import CompiledView, ViewItem

ViewItems = dict[int, tuple[CompiledView, tuple[ViewItem, ...]]]
"""By ``id(view)``: the view (kept, so an id is never taken for another view's) and its items."""
_NOTHING: Mapping[str, object] = {}


def items_by_view(views: Iterable[CompiledView], run: Sequence[Entry],
                  data_of: Callable[[Entry], object]) -> ViewItems:
    """For each of ``views`` (append mode only: an update-mode view's items depend on each feed's memory of
    its keys), the items of ``run`` it delivers, in seq order: ``view_items(view, run, data_of)``, with
    each entry parsed once and looked up once per field the views' equalities name."""
    found: dict[int, tuple[CompiledView, list[ViewItem]]] = {}
    filed: dict[str, dict[Value, list[CompiledView]]] = {}
    asked_always: list[CompiledView] = []
    for view in views:
        if view.removals:
            raise ValueError("an update-mode view's items depend on each feed's memory of its keys: use offer")
        if id(view) in found:
            continue
        found[id(view)] = (view, [])
        if view.equality is None:
            asked_always.append(view)
            continue
        field, values = view.equality
        by_value = filed.setdefault(field, {})
        for value in values:
            by_value.setdefault(value, []).append(view)
    fields = list(filed.items())
    for entry in run:
        data, key = data_of(entry), entry.key
        get = (data if type(data) is dict else _NOTHING).get
        item: ViewItem | None = None
        for field, by_value in fields:
            tagged = tag(key if field == KEY_FIELD else get(field))
            for view in by_value.get(tagged, ()) if tagged is not None else ():
                if view.matches(key, data):
                    item = item or ViewItem(entry, removed=False)
                    found[id(view)][1].append(item)
        for view in asked_always:
            if view.matches(key, data):
                item = item or ViewItem(entry, removed=False)
                found[id(view)][1].append(item)
    return {ident: (view, tuple(items)) for ident, (view, items) in found.items()}
