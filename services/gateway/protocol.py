"""Frames of the gateway protocol (docs/protocol.md): strict parsing of client frames, encoding of
server frames.

Entries are encoded once per pod (``encode_entry``) and the fragments joined into frames per client
(``pack_entries``): the JSON work does not grow with the number of clients.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from sparkwire.gateway.close_codes import CloseCode
from sparkwire.replaylog.model import Entry, Snapshot

PROTOCOL_VERSION = 1
MAX_CLIENT_FRAME_BYTES, MAX_SERVER_FRAME_BYTES = 8192, 1 << 20
# The WebSocket layer reads a client message whole up to this size, so the handler can answer a frame
# over MAX_CLIENT_FRAME_BYTES with an error frame before its 1009; a larger message is cut off by the
# WebSocket layer itself (1009, no error frame) rather than buffered.
MAX_CLIENT_MESSAGE_BYTES = 1 << 16
HELLO_TIMEOUT_S, PING_INTERVAL_S, PONG_TIMEOUT_S = 10.0, 20.0, 30.0
DEFAULT_ACK_EVERY, DEFAULT_ACK_INTERVAL_MS = 100, 1000
# Seqs are Redis stream id parts: unsigned 64-bit; a cursor past that is not a position.
MAX_SEQ = (1 << 64) - 1
MAX_COUNT = (1 << 63) - 1
SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MAX_EPOCH_CHARS = 64


class ProtocolError(Exception):
    """A client frame the server refuses; ``code`` is the close code to end the connection with."""

    def __init__(self, code: CloseCode, reason: str) -> None:
        super().__init__(f"{int(code)} {reason}")
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class Cursor:
    """The last entry a client applied: ``seq`` within ``epoch``."""

    epoch: str
    seq: int


@dataclass(frozen=True)
class Hello:
    version: int
    session: str | None
    cursor: Cursor | None
    token: str | None


@dataclass(frozen=True)
class Ack:
    seq: int
    duplicates: int
    gaps: int


@dataclass(frozen=True)
class Ping:
    t: int


@dataclass(frozen=True)
class Pong:
    t: int


ClientFrame = Hello | Ack | Ping | Pong

_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # type -> (required, optional); anything else is refused so that a misspelt "cursor" cannot
    # silently turn a resume into a snapshot.
    "hello": (frozenset({"type", "v"}), frozenset({"session", "cursor", "token"})),
    "ack": (frozenset({"type", "seq", "duplicates", "gaps"}), frozenset()),
    "ping": (frozenset({"type", "t"}), frozenset()),
    "pong": (frozenset({"type", "t"}), frozenset()),
}


def _violation(reason: str) -> NoReturn:
    raise ProtocolError(CloseCode.PROTOCOL_VIOLATION, reason)


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    document: dict[str, object] = {}
    for key, value in pairs:
        if key in document:
            _violation(f"field {key!r} appears twice")
        document[key] = value
    return document


def _reject_constant(name: str) -> NoReturn:  # NaN, Infinity: Python accepts them, JSON does not
    _violation(f"{name} is not JSON")


def _integer(where: str, value: object, maximum: int) -> int:
    # bool is an int in Python but not a number in JSON.
    if not isinstance(value, int) or isinstance(value, bool):
        _violation(f"{where} must be an integer, got {type(value).__name__}")
    if not 0 <= value <= maximum:
        _violation(f"{where} must be between 0 and {maximum}, got {value}")
    return value


def _optional_string(where: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    _violation(f"{where} must be a string or null, got {type(value).__name__}")


def _cursor(value: object) -> Cursor | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        _violation(f"hello.cursor must be an object or null, got {type(value).__name__}")
    if set(value) != {"epoch", "seq"}:
        _violation(f"hello.cursor must have exactly the fields epoch and seq, got {sorted(value)}")
    epoch = value["epoch"]
    if not isinstance(epoch, str) or len(epoch) > MAX_EPOCH_CHARS:
        _violation(f"hello.cursor.epoch must be a string of at most {MAX_EPOCH_CHARS} characters, got {epoch!r:.80}")
    return Cursor(epoch=epoch, seq=_integer("hello.cursor.seq", value["seq"], MAX_SEQ))


def _hello(document: dict[str, object]) -> Hello:
    session = _optional_string("hello.session", document.get("session"))
    if session is not None and not SESSION_ID.match(session):
        _violation("hello.session must be 1-128 characters of letters, digits, '_' or '-'")
    return Hello(
        version=PROTOCOL_VERSION,
        session=session,
        cursor=_cursor(document.get("cursor")),
        token=_optional_string("hello.token", document.get("token")),
    )


def _check_version(document: dict[str, object]) -> None:
    # Checked before the other fields: a newer client's hello may carry fields this version does not
    # know, and it should learn that the version is the problem.
    if "v" not in document:
        _violation("hello needs the field 'v' (protocol version)")
    version = document["v"]
    if not isinstance(version, int) or isinstance(version, bool):
        _violation(f"hello.v must be an integer, got {type(version).__name__}")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            CloseCode.UNSUPPORTED_VERSION, f"protocol version {version} is not supported; use {PROTOCOL_VERSION}"
        )


def parse_client_frame(text: str | bytes, max_bytes: int = MAX_CLIENT_FRAME_BYTES) -> ClientFrame:
    """The frame in ``text``, or ``ProtocolError`` saying what is wrong with it. Never raises anything else."""
    if isinstance(text, bytes):
        raise ProtocolError(CloseCode.UNSUPPORTED_DATA, "frames must be text (JSON), not binary")
    # A character is at least one byte: the cheap test spares encoding a huge frame.
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ProtocolError(CloseCode.MESSAGE_TOO_BIG, f"frame is larger than {max_bytes} bytes")
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, int digit limit, deep nesting
        _violation(f"frame is not JSON: {error}")
    if not isinstance(document, dict):
        _violation(f"frame must be a JSON object, got {type(document).__name__}")
    frame_type = document.get("type")
    if not isinstance(frame_type, str):
        _violation("frame needs a string field 'type'")
    if frame_type not in _FIELDS:
        _violation(f"unknown frame type {frame_type[:40]!r}; expected one of {sorted(_FIELDS)}")
    if frame_type == "hello":
        _check_version(document)
    required, optional = _FIELDS[frame_type]
    missing = required - document.keys()
    if missing:
        _violation(f"{frame_type} is missing {sorted(missing)}")
    unknown = document.keys() - required - optional
    if unknown:
        _violation(f"{frame_type} has unknown fields {sorted(unknown)[:5]}")
    if frame_type == "hello":
        return _hello(document)
    if frame_type == "ack":
        return Ack(
            seq=_integer("ack.seq", document["seq"], MAX_SEQ),
            duplicates=_integer("ack.duplicates", document["duplicates"], MAX_COUNT),
            gaps=_integer("ack.gaps", document["gaps"], MAX_COUNT),
        )
    t = _integer(f"{frame_type}.t", document["t"], MAX_COUNT)
    return Ping(t) if frame_type == "ping" else Pong(t)


# --- server frames -----------------------------------------------------------------------------


def _dumps(value: object) -> str:
    # NaN/Infinity are not JSON: a browser's JSON.parse would reject the whole frame.
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class Welcome:
    session: str
    epoch: str
    head_seq: int
    recovered: bool
    reset: str | None
    ack_every: int
    ack_interval_ms: int


def encode_welcome(welcome: Welcome) -> str:
    return _dumps({
        "type": "welcome", "v": PROTOCOL_VERSION, "session": welcome.session, "epoch": welcome.epoch,
        "headSeq": welcome.head_seq, "recovered": welcome.recovered, "reset": welcome.reset,
        "ackEvery": welcome.ack_every, "ackIntervalMs": welcome.ack_interval_ms,
    })


@dataclass(frozen=True)
class EncodedEntry:
    """One entry's JSON object, encoded once and shared by every client of the pod."""

    seq: int
    json: str
    nbytes: int


def encode_entry(entry: Entry) -> EncodedEntry:
    """``entry`` as a JSON object; ``data`` (already JSON in the log) is embedded as is, not re-encoded.

    Raises ValueError if ``data`` is not JSON: the log's contract is broken and the server must not
    send a frame the client cannot parse.
    """
    try:
        json.loads(entry.data, parse_constant=_reject_constant)
    except (ValueError, RecursionError, ProtocolError) as error:
        raise ValueError(f"data of seq {entry.seq} is not valid JSON: {error}") from None
    text = (
        f'{{"seq":{entry.seq},"processingId":{_dumps(entry.processing_id)},"key":{_dumps(entry.key)},'
        f'"data":{entry.data},"commitMs":{entry.commit_ms}}}'
    )
    return EncodedEntry(seq=entry.seq, json=text, nbytes=len(text.encode()))


def _entries_head(epoch: str) -> str:
    return f'{{"type":"entries","epoch":{_dumps(epoch)},"entries":['


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
        f"{_dumps(key)}:" + _dumps({"seq": item.seq, "processingId": item.processing_id, "data": item.data})
        for key, item in sorted(snapshot.items.items())
    ]
    head = f'{{"type":"snapshot","epoch":{_dumps(snapshot.epoch)},"seq":{snapshot.seq},"items":{{'
    overhead = len(head.encode()) + len('},"more":false}')
    runs = _pack([(item, len(item.encode())) for item in items], overhead, max_frame_bytes)
    last = len(runs) - 1
    return [head + ",".join(run) + f'}},"more":{"true" if i < last else "false"}}}' for i, run in enumerate(runs)]


def encode_error(code: CloseCode, reason: str) -> str:
    return _dumps({"type": "error", "code": int(code), "name": code.name.lower(), "reason": reason})


def encode_heartbeat(frame: Ping | Pong) -> str:
    return _dumps({"type": "ping" if isinstance(frame, Ping) else "pong", "t": frame.t})
