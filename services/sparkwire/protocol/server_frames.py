"""Server frames (welcome, snapshot, entries, acks, error): how the server encodes them and how a client reads
them (docs/protocol.md, "Server frames").

Entries are encoded once per pod (``encode_entry``) and the fragments joined into frames per client
(``pack_entries``): the JSON work does not grow with the number of clients. A client's parsing is checked
enough that a malformed frame cannot corrupt its state (a seq that is not an integer, an entry without a
processingId); unknown frame types are returned as ``UnknownFrame`` so that a newer server's additions
do not end the connection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from sparkwire.protocol.client_frames import Ping, Pong
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.digest import DIGEST
from sparkwire.protocol.encoding import dumps

# Re-exported: an entry is part of these frames' API (entry_codec.py holds it apart for view_frames.py).
from sparkwire.protocol.entry_codec import EncodedEntry as EncodedEntry
from sparkwire.protocol.entry_codec import ReceivedEntry as ReceivedEntry
from sparkwire.protocol.entry_codec import encode_entry as encode_entry
from sparkwire.protocol.items import Snapshot, StateItem
from sparkwire.protocol.limits import MAX_SERVER_FRAME_BYTES, PROTOCOL_VERSION
from sparkwire.protocol.view_frames import ViewEntriesFrame, parse_view_entries

# --- what the server writes -------------------------------------------------------------------


@dataclass(frozen=True)
class Welcome:
    session: str
    epoch: str
    head_seq: int
    recovered: bool
    reset: str | None
    ack_every: int
    ack_interval_ms: int
    view: str | None = None  # a filtered subscription's view id (scope.View.id); None: unfiltered


def encode_welcome(welcome: Welcome) -> str:
    document: dict[str, object] = {
        "type": "welcome", "v": PROTOCOL_VERSION, "session": welcome.session, "epoch": welcome.epoch,
        "headSeq": welcome.head_seq, "recovered": welcome.recovered, "reset": welcome.reset,
        "ackEvery": welcome.ack_every, "ackIntervalMs": welcome.ack_interval_ms,
    }
    if welcome.view is not None:
        document["view"] = welcome.view
    return dumps(document)


@dataclass(frozen=True)
class AckPolicy:
    """``acks``: from now on, ack after ``ack_every`` entries or ``ack_interval_ms``, whichever first — what
    the welcome asked, asked again when the pod's connection count moved its ack budget (docs/protocol.md)."""

    ack_every: int
    ack_interval_ms: int


def encode_ack_policy(policy: AckPolicy) -> str:
    return dumps({"type": "acks", "ackEvery": policy.ack_every, "ackIntervalMs": policy.ack_interval_ms})


def _entries_head(epoch: str) -> str:
    return f'{{"type":"entries","epoch":{dumps(epoch)},"entries":['


def encode_entries(epoch: str, entries: Sequence[EncodedEntry]) -> str:  # given in seq order
    return _entries_head(epoch) + ",".join(e.json for e in entries) + "]}"


def _pack(fragments: Sequence[tuple[str, int]], overhead: int, max_frame_bytes: int) -> list[list[str]]:
    """Fragments (text, bytes) cut into runs whose comma-joined size plus ``overhead`` fits the limit; a
    fragment too large on its own gets a run to itself (it cannot be split). At least one run."""
    runs: list[list[str]] = [[]]
    size = overhead
    for text, nbytes in fragments:
        if runs[-1] and size + 1 + nbytes > max_frame_bytes:
            runs.append([])
            size = overhead
        size += nbytes + (1 if runs[-1] else 0)
        runs[-1].append(text)
    return runs


def pack_entries(
    epoch: str, entries: Sequence[EncodedEntry], max_frame_bytes: int = MAX_SERVER_FRAME_BYTES
) -> list[str]:
    """``entries`` in as few ``entries`` frames as fit ``max_frame_bytes`` (none for no entries)."""
    head = _entries_head(epoch)
    runs = _pack([(e.json, e.nbytes) for e in entries], len(head.encode()) + 2, max_frame_bytes)
    return [head + ",".join(run) + "]}" for run in runs if run]


def encode_snapshot(snapshot: Snapshot, max_frame_bytes: int = MAX_SERVER_FRAME_BYTES) -> list[str]:
    """``snapshot`` as one or more ``snapshot`` frames (``more`` true on all but the last), items by key.

    Always at least one frame, so an empty stream still tells the client its epoch and seq.
    """
    items = [
        f"{dumps(key)}:" + dumps({"seq": item.seq, "processingId": item.processing_id, "data": item.data})
        for key, item in sorted(snapshot.items.items())
    ]
    digest = "" if snapshot.digest is None else f'"digest":"{snapshot.digest}",'
    head = f'{{"type":"snapshot","epoch":{dumps(snapshot.epoch)},"seq":{snapshot.seq},{digest}"items":{{'
    overhead = len(head.encode()) + len('},"more":false}')
    runs = _pack([(item, len(item.encode())) for item in items], overhead, max_frame_bytes)
    last = len(runs) - 1
    return [head + ",".join(run) + f'}},"more":{"true" if i < last else "false"}}}' for i, run in enumerate(runs)]


def encode_error(code: CloseCode, reason: str) -> str:
    return dumps({"type": "error", "code": int(code), "name": code.name.lower(), "reason": reason})


# --- how a client reads them ------------------------------------------------------------------


class ServerFrameError(ValueError):
    """A server frame the client cannot make sense of (a server bug, or not this protocol)."""


@dataclass(frozen=True)
class EntriesFrame:
    epoch: str
    entries: tuple[ReceivedEntry, ...]


@dataclass(frozen=True)
class SnapshotPart:
    """One frame of a snapshot; ``more`` is true on all parts but the last."""

    epoch: str
    seq: int
    items: dict[str, StateItem]
    more: bool
    digest: str | None = None  # of the entry at ``seq``; None from an older server, or a log without it


@dataclass(frozen=True)
class ErrorFrame:
    """Sent just before the server closes; ``reason`` is the full text the close frame may truncate."""

    code: int
    name: str
    reason: str


@dataclass(frozen=True)
class UnknownFrame:
    type: str


ServerFrame = (Welcome | SnapshotPart | EntriesFrame | ViewEntriesFrame | AckPolicy | ErrorFrame | Ping | Pong
               | UnknownFrame)


def _bad(reason: str) -> NoReturn:
    raise ServerFrameError(reason)


def _field(document: dict[str, object], where: str, name: str) -> object:
    if name not in document:
        _bad(f"{where} is missing {name!r}")
    return document[name]


def _int(document: dict[str, object], where: str, name: str) -> int:
    value = _field(document, where, name)
    # bool is an int in Python but not a number in JSON.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        _bad(f"{where}.{name} must be a non-negative integer, got {value!r:.40}")
    return value


def _str(document: dict[str, object], where: str, name: str) -> str:
    value = _field(document, where, name)
    if not isinstance(value, str):
        _bad(f"{where}.{name} must be a string, got {type(value).__name__}")
    return value


def _bool(document: dict[str, object], where: str, name: str) -> bool:
    value = _field(document, where, name)
    if not isinstance(value, bool):
        _bad(f"{where}.{name} must be a boolean, got {type(value).__name__}")
    return value


def _optional_digest(document: dict[str, object], where: str) -> str | None:
    value = document.get("digest")
    if value is None or (isinstance(value, str) and DIGEST.match(value)):
        return value
    _bad(f"{where}.digest must be 16 lowercase hex digits, got {value!r:.40}")


def _object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        _bad(f"{where} must be an object, got {type(value).__name__}")
    return value


def _ack_policy(document: dict[str, object]) -> AckPolicy:
    policy = AckPolicy(ack_every=_int(document, "acks", "ackEvery"),
                       ack_interval_ms=_int(document, "acks", "ackIntervalMs"))
    if policy.ack_every < 1:
        _bad("acks.ackEvery must be at least 1")
    return policy


def _welcome(document: dict[str, object]) -> Welcome:
    reset = _field(document, "welcome", "reset")
    if reset is not None and not isinstance(reset, str):
        _bad(f"welcome.reset must be a string or null, got {type(reset).__name__}")
    ack_every = _int(document, "welcome", "ackEvery")
    if ack_every < 1:  # zero would ask for an ack before any entry: nothing to ack
        _bad("welcome.ackEvery must be at least 1")
    view = document.get("view")
    if view is not None and not isinstance(view, str):
        _bad(f"welcome.view must be a string, got {type(view).__name__}")
    return Welcome(
        session=_str(document, "welcome", "session"),
        epoch=_str(document, "welcome", "epoch"),
        head_seq=_int(document, "welcome", "headSeq"),
        recovered=_bool(document, "welcome", "recovered"),
        reset=reset,
        ack_every=ack_every,
        ack_interval_ms=_int(document, "welcome", "ackIntervalMs"),
        view=view,
    )


def _snapshot(document: dict[str, object]) -> SnapshotPart:
    items: dict[str, StateItem] = {}
    for key, raw in _object(_field(document, "snapshot", "items"), "snapshot.items").items():
        item = _object(raw, f"snapshot.items[{key!r:.40}]")
        where = "snapshot item"
        items[key] = StateItem(
            seq=_int(item, where, "seq"),
            processing_id=_str(item, where, "processingId"),
            data=_field(item, where, "data"),
        )
    return SnapshotPart(
        epoch=_str(document, "snapshot", "epoch"),
        seq=_int(document, "snapshot", "seq"),
        items=items,
        more=_bool(document, "snapshot", "more"),
        digest=_optional_digest(document, "snapshot"),
    )


def _entry(raw: object) -> ReceivedEntry:
    entry = _object(raw, "entries[]")
    return ReceivedEntry(
        seq=_int(entry, "entries[]", "seq"),
        processing_id=_str(entry, "entries[]", "processingId"),
        key=_str(entry, "entries[]", "key"),
        data=_field(entry, "entries[]", "data"),
        commit_ms=_int(entry, "entries[]", "commitMs"),
        digest=_optional_digest(entry, "entries[]"),
    )


def _entries(document: dict[str, object]) -> EntriesFrame | ViewEntriesFrame:
    epoch = _str(document, "entries", "epoch")
    if "after" in document:  # a filtered subscription's frame (view_frames.py)
        return parse_view_entries(document, epoch, _entry, _bad)
    raw_entries = _field(document, "entries", "entries")
    if not isinstance(raw_entries, list):
        _bad(f"entries.entries must be a list, got {type(raw_entries).__name__}")
    return EntriesFrame(epoch=epoch, entries=tuple(_entry(raw) for raw in raw_entries))


def parse_server_frame(text: str | bytes) -> ServerFrame:
    """The frame in ``text``; ``ServerFrameError`` if it is not a frame of this protocol."""
    if isinstance(text, bytes):
        _bad("the server sent a binary frame; frames are JSON text")
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        _bad(f"frame is not JSON: {error}")
    document = _object(document, "frame")
    frame_type = _field(document, "frame", "type")
    if not isinstance(frame_type, str):
        _bad("frame needs a string field 'type'")
    if frame_type == "welcome":
        return _welcome(document)
    if frame_type == "snapshot":
        return _snapshot(document)
    if frame_type == "entries":
        return _entries(document)
    if frame_type == "error":
        return ErrorFrame(
            code=_int(document, "error", "code"), name=_str(document, "error", "name"),
            reason=_str(document, "error", "reason"),
        )
    if frame_type == "acks":
        return _ack_policy(document)
    if frame_type in ("ping", "pong"):
        t = _int(document, frame_type, "t")
        return Ping(t) if frame_type == "ping" else Pong(t)
    return UnknownFrame(frame_type)
