"""``GET /history?stream=<S>&last=<n>``: the last entries of the log and the state they end at, read in one
transaction, for a page that opens with its charts full and then resumes after them over ``/ws``
(docs/protocol.md, "GET /history")."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway import metrics
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.http import bearer
from sparkwire.protocol.encoding import dumps
from sparkwire.protocol.limits import DEFAULT_HISTORY_ENTRIES, MAX_HISTORY_ENTRIES
from sparkwire.protocol.server_frames import encode_entry
from sparkwire.replaylog.model import History
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


def encode_history(history: History, last: int) -> str:
    """The document, entries as in an ``entries`` frame (``data`` embedded as stored). An entry whose data
    is not JSON is left out, as the live feed leaves it out."""
    fragments: list[str] = []
    for entry in history.entries:
        try:
            fragments.append(encode_entry(entry).json)
        except ValueError:
            log.exception("entry with invalid data left out of a history")
    items = {k: {"seq": v.seq, "processingId": v.processing_id, "data": v.data} for k, v in history.items.items()}
    return (f'{{"epoch":{dumps(history.epoch)},"seq":{history.seq},"firstSeq":{history.first_seq},'
            f'"last":{last},"entries":[{",".join(fragments)}],"items":{json.dumps(items)}}}')


def history_endpoint(hubs: Mapping[str, StreamHub], auth_secret: str) -> Callable[[Request], Awaitable[Response]]:
    async def history(request: Request) -> Response:
        hub = bearer.requested(request, auth_secret, hubs)
        if isinstance(hub, Response):
            return hub
        try:
            last = parse_last(request.query_params.get("last"))
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        try:
            read = await hub.log.history(last)
        except UNAVAILABLE:
            metrics.REDIS_ERRORS.labels(operation="history").inc()
            return JSONResponse({"error": "redis unavailable"}, status_code=503)
        return Response(encode_history(read, last), media_type="application/json")

    return history
