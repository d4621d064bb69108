"""``GET /history?stream=<S>&last=<n>``: the last entries of the log and the state they end at, read in one
transaction, for a page that opens with its charts full and then resumes after them over ``/ws``
(docs/protocol.md, "GET /history"). With a ``filter`` or a scoped token (issue 43): ``last`` still counts
entries of the log, ``entries`` holds those the view delivers, ``items`` the view's state, and the answer adds
``digest`` (of the log's entry at ``seq``, delivered or not; absent when the log holds none) and ``view``."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway import metrics
from sparkwire.gateway.auth.tokens import Auth
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.http import bearer
from sparkwire.gateway.http.view_param import compiled, requested_view
from sparkwire.protocol.encoding import dumps
from sparkwire.protocol.limits import DEFAULT_HISTORY_ENTRIES, MAX_HISTORY_ENTRIES
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import encode_entry
from sparkwire.protocol.view_feed import filter_items
from sparkwire.replaylog.model import Entry, History
from sparkwire.replaylog.port import UNAVAILABLE

log = logging.getLogger(__name__)

_COUNT = re.compile(r"[0-9]{1,18}")


def parse_last(raw: str | None) -> int:
    """How many entries to read: ``DEFAULT_HISTORY_ENTRIES`` when absent, at most ``MAX_HISTORY_ENTRIES``
    (larger values are capped); ValueError for anything but a non-negative decimal integer."""
    if raw is None:
        return DEFAULT_HISTORY_ENTRIES
    if not _COUNT.fullmatch(raw):
        raise ValueError(f"last must be an integer from 0 to {MAX_HISTORY_ENTRIES}, got {raw[:40]!r}")
    return min(int(raw), MAX_HISTORY_ENTRIES)


def encode_history(history: History, last: int, extra: str = "") -> str:
    """The document, entries as in an ``entries`` frame (``data`` embedded as stored). An entry whose data
    is not JSON is left out, as the live feed leaves it out. ``extra``: more fields, written before the last."""
    fragments: list[str] = []
    for entry in history.entries:
        try:
            fragments.append(encode_entry(entry).json)
        except ValueError:
            log.exception("entry with invalid data left out of a history")
    items = {k: {"seq": v.seq, "processingId": v.processing_id, "data": v.data} for k, v in history.items.items()}
    return (f'{{"epoch":{dumps(history.epoch)},"seq":{history.seq},"firstSeq":{history.first_seq},'
            f'"last":{last},{extra}"entries":[{",".join(fragments)}],"items":{json.dumps(items)}}}')


async def view_history(hub: StreamHub, history: History, last: int, view: View) -> str:
    """``history`` as ``view`` sees it (no removals: ``items`` is the view's state at ``seq``)."""
    matcher, views = await compiled(hub, view), hub.views
    kept: list[Entry] = []
    for entry in history.entries:
        try:
            if matcher.matches(entry.key, views.data_of(entry)):
                kept.append(entry)
        except ValueError:  # data not JSON: left out, as encode_history leaves it out
            log.exception("entry with invalid data left out of a history")
    at_seq = history.entries[-1] if history.entries and history.entries[-1].seq == history.seq else None
    if at_seq is None and history.seq > 0:
        at_seq = await hub.entry_at(history.seq)
    digest = f'"digest":"{at_seq.digest}",' if at_seq is not None and at_seq.seq == history.seq else ""
    filtered = replace(history, entries=kept, items=filter_items(history.items, matcher))
    return encode_history(filtered, last, f'{digest}"view":"{view.id}",')


def history_endpoint(hubs: Mapping[str, StreamHub], auth_secret: Auth) -> Callable[[Request], Awaitable[Response]]:
    async def history(request: Request) -> Response:
        hub = await bearer.requested(request, auth_secret, hubs)
        if isinstance(hub, Response):
            return hub
        try:
            last = parse_last(request.query_params.get("last"))
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        view = requested_view(request, auth_secret, hub.stream)
        if isinstance(view, Response):
            return view
        try:
            read = await hub.log.history(last)
            text = encode_history(read, last) if view is None else await view_history(hub, read, last, view)
        except UNAVAILABLE:
            metrics.REDIS_ERRORS.labels(operation="history").inc()
            return JSONResponse({"error": "redis unavailable"}, status_code=503)
        return Response(text, media_type="application/json")

    return history
