"""One entry on the wire, both ways: ``encode_entry`` writes it once per pod (its fragment then joins the
frames of every client, plain or filtered), ``ReceivedEntry`` is what a client reads back. Apart from the
frames that carry it (server_frames.py, view_frames.py) so that both can use it without importing each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sparkwire.protocol.encoding import dumps, reject_constant
from sparkwire.protocol.items import Entry


@dataclass(frozen=True)
class EncodedEntry:
    """One entry's JSON object, encoded once and shared by every client of the pod."""

    seq: int
    json: str
    nbytes: int
    digest: str = ""  # the entry's: a filtered frame cut after it covers up to it (view_frames.pack_view_entries)


def encode_entry(entry: Entry) -> EncodedEntry:
    """``entry`` as a JSON object; ``data`` (already JSON in the log) is embedded as is, not re-encoded.

    Raises ValueError if ``data`` is not JSON: the log's contract is broken and the server must not
    send a frame the client cannot parse.
    """
    try:
        json.loads(entry.data, parse_constant=reject_constant)
    except (ValueError, RecursionError) as error:  # NotJsonError is a ValueError
        raise ValueError(f"data of seq {entry.seq} is not valid JSON: {error}") from None
    text = (
        f'{{"seq":{entry.seq},"processingId":{dumps(entry.processing_id)},"key":{dumps(entry.key)},'
        f'"data":{entry.data},"commitMs":{entry.commit_ms},"digest":"{entry.digest}"}}'
    )
    return EncodedEntry(seq=entry.seq, json=text, nbytes=len(text.encode()), digest=entry.digest)


@dataclass(frozen=True)
class ReceivedEntry:
    """One entry of an ``entries`` frame; ``data`` is the parsed result object."""

    seq: int
    processing_id: str
    key: str
    data: object
    commit_ms: int
    digest: str | None = None  # None from a server older than digests
