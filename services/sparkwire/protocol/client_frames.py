"""Client frames (hello, ack, ping, pong): how a client writes them and how the server parses them,
strictly (docs/protocol.md, "Client frames")."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import NoReturn

from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.digest import DIGEST
from sparkwire.protocol.encoding import dumps, reject_constant
from sparkwire.protocol.filter_form import Filter, FilterError, filter_document, parse_filter
from sparkwire.protocol.limits import (
    MAX_CLIENT_FRAME_BYTES,
    MAX_COUNT,
    MAX_EPOCH_CHARS,
    MAX_SEQ,
    PROTOCOL_VERSION,
    SESSION_ID,
)
from sparkwire.protocol.positions import Cursor


class ProtocolError(Exception):
    """A client frame the server refuses; ``code`` is the close code to end the connection with."""

    def __init__(self, code: CloseCode, reason: str) -> None:
        super().__init__(f"{int(code)} {reason}")
        self.code = code
        self.reason = reason




@dataclass(frozen=True)
class Hello:
    version: int
    session: str | None
    cursor: Cursor | None
    token: str | None
    filter: Filter | None = None  # a filtered subscription (docs/protocol.md, "Filtered subscriptions")


@dataclass(frozen=True)
class Ack:
    seq: int
    duplicates: int
    gaps: int
    digest: str | None = None  # of the entry at ``seq``; stored with the session, checked at its resume


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
    "hello": (frozenset({"type", "v"}), frozenset({"session", "cursor", "token", "filter"})),
    "ack": (frozenset({"type", "seq", "duplicates", "gaps"}), frozenset({"digest"})),
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


# One decoder for every frame: ``json.loads`` with hooks builds a ``JSONDecoder`` per call, a few µs of each of
# the ~1,000 acks a second a pod parses.
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_constant=reject_constant)


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


def _digest(where: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not DIGEST.match(value):
        _violation(f"{where} must be 16 lowercase hex digits or null, got {value!r:.40}")
    return value


def _cursor(value: object) -> Cursor | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        _violation(f"hello.cursor must be an object or null, got {type(value).__name__}")
    if not {"epoch", "seq"} <= set(value) <= {"epoch", "seq", "digest", "view"}:
        _violation(f"hello.cursor must have the fields epoch, seq and optionally digest and view, got "
                   f"{sorted(value)[:5]}")
    epoch = value["epoch"]
    if not isinstance(epoch, str) or len(epoch) > MAX_EPOCH_CHARS:
        _violation(f"hello.cursor.epoch must be a string of at most {MAX_EPOCH_CHARS} characters, got {epoch!r:.80}")
    view = value.get("view")
    if view is not None and not (isinstance(view, str) and DIGEST.match(view)):  # view ids look like digests
        _violation(f"hello.cursor.view must be 16 lowercase hex digits or null, got {view!r:.40}")
    return Cursor(epoch=epoch, seq=_integer("hello.cursor.seq", value["seq"], MAX_SEQ),
                  digest=_digest("hello.cursor.digest", value.get("digest")), view=view)


def _filter(value: object) -> Filter | None:
    if value is None:
        return None
    try:
        return parse_filter(value, "hello.filter")
    except FilterError as error:  # its own code: the client can tell a bad filter from a bad frame
        raise ProtocolError(CloseCode.INVALID_FILTER, error.reason) from None


def _hello(document: dict[str, object]) -> Hello:
    session = _optional_string("hello.session", document.get("session"))
    if session is not None and not SESSION_ID.match(session):
        _violation("hello.session must be 1-128 characters of letters, digits, '_' or '-'")
    return Hello(
        version=PROTOCOL_VERSION,
        session=session,
        cursor=_cursor(document.get("cursor")),
        token=_optional_string("hello.token", document.get("token")),
        filter=_filter(document.get("filter")),
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


# The frames a pod parses most (an ack from every client every second or so, a ping or a pong now and then),
# in the exact form every sparkwire client writes them (``encode_ack``, ``encode_heartbeat``, the browser
# client, the load generator: compact, the fields in this order), read by one regular expression instead of
# the JSON decoder and its duplicate-key hook: a third of an ack's parse. It matches only text the full parse
# accepts with the same result: JSON integers (no sign, no leading zero), a digest of 16 lowercase hex digits
# or null, nothing else in the object. Anything else, a value out of range included, takes the full parse,
# which gives its reason.
_CANONICAL = re.compile(
    r'\{"type":"(?:ack","seq":(0|[1-9][0-9]{0,19}),"duplicates":(0|[1-9][0-9]{0,18}),"gaps":(0|[1-9][0-9]{0,18})'
    r'(?:,"digest":(?:"([0-9a-f]{16})"|null))?|(ping|pong)","t":(0|[1-9][0-9]{0,18}))\}\Z'
)


def _canonical_frame(text: str) -> ClientFrame | None:
    """The ack, ping or pong ``text`` is in the form clients write, or None (then ``_parsed_frame`` decides)."""
    match = _CANONICAL.match(text)
    if match is None:
        return None
    seq, duplicates, gaps, digest, heartbeat, t = match.groups()
    if heartbeat is not None:
        value = int(t)
        if value > MAX_COUNT:
            return None
        return Ping(value) if heartbeat == "ping" else Pong(value)
    ack = Ack(int(seq), int(duplicates), int(gaps), digest)
    if ack.seq > MAX_SEQ or ack.duplicates > MAX_COUNT or ack.gaps > MAX_COUNT:
        return None
    return ack


def parse_client_frame(
    text: str | bytes, max_bytes: int = MAX_CLIENT_FRAME_BYTES, *, filters: bool = False
) -> ClientFrame:
    """The frame in ``text``, or ``ProtocolError`` saying what is wrong with it. Never raises anything else.

    ``filters``: the server serves filtered subscriptions. Until it says so, ``hello.filter`` is an unknown
    field (``4400``, as before the field existed): a server that would ignore it must not deliver every
    row to a client that asked for some."""
    if isinstance(text, bytes):
        raise ProtocolError(CloseCode.UNSUPPORTED_DATA, "frames must be text (JSON), not binary")
    # A character is at least one byte: the cheap test spares encoding a huge frame. A canonical frame is
    # ASCII, its length its size.
    if len(text) > max_bytes:
        raise ProtocolError(CloseCode.MESSAGE_TOO_BIG, f"frame is larger than {max_bytes} bytes")
    frame = _canonical_frame(text)
    if frame is not None:
        return frame
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ProtocolError(CloseCode.MESSAGE_TOO_BIG, f"frame is larger than {max_bytes} bytes")
    return _parsed_frame(text, filters)


def _parsed_frame(text: str, filters: bool) -> ClientFrame:
    """The full parse: JSON (duplicate keys, NaN and Infinity refused), then each field checked."""
    try:
        document = _DECODER.decode(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, NaN, int digit limit, nesting
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
    if frame_type == "hello" and not filters:
        unknown |= document.keys() & {"filter"}
    if unknown:
        _violation(f"{frame_type} has unknown fields {sorted(unknown)[:5]}")
    if frame_type == "hello":
        return _hello(document)
    if frame_type == "ack":
        return Ack(
            seq=_integer("ack.seq", document["seq"], MAX_SEQ),
            duplicates=_integer("ack.duplicates", document["duplicates"], MAX_COUNT),
            gaps=_integer("ack.gaps", document["gaps"], MAX_COUNT),
            digest=_digest("ack.digest", document.get("digest")),
        )
    t = _integer(f"{frame_type}.t", document["t"], MAX_COUNT)
    return Ping(t) if frame_type == "ping" else Pong(t)



# --- what a client writes ---------------------------------------------------------------------


def encode_hello(hello: Hello) -> str:
    document: dict[str, object] = {"type": "hello", "v": hello.version, "session": hello.session}
    if hello.cursor is not None:
        cursor: dict[str, object] = {"epoch": hello.cursor.epoch, "seq": hello.cursor.seq}
        if hello.cursor.digest is not None:  # only to a server that sent digests: an older one refuses the field
            cursor["digest"] = hello.cursor.digest
        if hello.cursor.view is not None:  # only to a server that sent a view, as the digest
            cursor["view"] = hello.cursor.view
        document["cursor"] = cursor
    if hello.token is not None:
        document["token"] = hello.token
    if hello.filter is not None:
        document["filter"] = filter_document(hello.filter)
    return dumps(document)


def encode_ack(ack: Ack) -> str:
    document: dict[str, object] = {"type": "ack", "seq": ack.seq, "duplicates": ack.duplicates, "gaps": ack.gaps}
    if ack.digest is not None:
        document["digest"] = ack.digest
    return dumps(document)


def encode_heartbeat(frame: Ping | Pong) -> str:
    """A ping or a pong; either side sends both."""
    return dumps({"type": "ping" if isinstance(frame, Ping) else "pong", "t": frame.t})
