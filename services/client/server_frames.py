"""Server frames as the client reads them (docs/protocol.md, "Server frames"): JSON text in, typed
values out, or ``ServerFrameError`` naming what is wrong.

Checked enough that a malformed frame cannot corrupt the client's state (a seq that is not an integer,
an entry without a processingId); unknown frame types are returned as ``UnknownFrame`` so that a newer
server's additions do not end the connection.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NoReturn

from sparkwire.gateway.protocol import Ping, Pong, Welcome
from sparkwire.replaylog.model import StateItem


class ServerFrameError(ValueError):
    """A server frame the client cannot make sense of (a server bug, or not this protocol)."""


@dataclass(frozen=True)
class ReceivedEntry:
    """One entry of an ``entries`` frame; ``data`` is the parsed result object."""

    seq: int
    processing_id: str
    key: str
    data: object
    commit_ms: int


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


@dataclass(frozen=True)
class ErrorFrame:
    """Sent just before the server closes; ``reason`` is the full text the close frame may truncate."""

    code: int
    name: str
    reason: str


@dataclass(frozen=True)
class UnknownFrame:
    type: str


ServerFrame = Welcome | SnapshotPart | EntriesFrame | ErrorFrame | Ping | Pong | UnknownFrame


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


def _object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        _bad(f"{where} must be an object, got {type(value).__name__}")
    return value


def _welcome(document: dict[str, object]) -> Welcome:
    reset = _field(document, "welcome", "reset")
    if reset is not None and not isinstance(reset, str):
        _bad(f"welcome.reset must be a string or null, got {type(reset).__name__}")
    ack_every = _int(document, "welcome", "ackEvery")
    if ack_every < 1:  # zero would ask for an ack before any entry: nothing to ack
        _bad("welcome.ackEvery must be at least 1")
    return Welcome(
        session=_str(document, "welcome", "session"),
        epoch=_str(document, "welcome", "epoch"),
        head_seq=_int(document, "welcome", "headSeq"),
        recovered=_bool(document, "welcome", "recovered"),
        reset=reset,
        ack_every=ack_every,
        ack_interval_ms=_int(document, "welcome", "ackIntervalMs"),
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
    )


def _entries(document: dict[str, object]) -> EntriesFrame:
    raw_entries = _field(document, "entries", "entries")
    if not isinstance(raw_entries, list):
        _bad(f"entries.entries must be a list, got {type(raw_entries).__name__}")
    entries = []
    for raw in raw_entries:
        entry = _object(raw, "entries[]")
        entries.append(ReceivedEntry(
            seq=_int(entry, "entries[]", "seq"),
            processing_id=_str(entry, "entries[]", "processingId"),
            key=_str(entry, "entries[]", "key"),
            data=_field(entry, "entries[]", "data"),
            commit_ms=_int(entry, "entries[]", "commitMs"),
        ))
    return EntriesFrame(epoch=_str(document, "entries", "epoch"), entries=tuple(entries))


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
    if frame_type in ("ping", "pong"):
        t = _int(document, frame_type, "t")
        return Ping(t) if frame_type == "ping" else Pong(t)
    return UnknownFrame(frame_type)
