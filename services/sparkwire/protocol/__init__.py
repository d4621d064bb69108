"""The gateway protocol (docs/protocol.md), both directions, shared by the gateway and the clients.

``client_frames`` (hello, ack, ping, pong: written by clients, parsed strictly by the server),
``server_frames`` (welcome, snapshot, entries, error: encoded by the server, read by clients),
``close_codes`` (which closes mean "reconnect and resume"), ``positions`` (the cursor; a gap),
``limits`` (sizes, timeouts, defaults); filtered subscriptions: ``filter_form`` (the filter, parsed and
canonical), ``filter_match`` (compiled), ``scope`` (the token's scope and the view), ``view_frames`` (the
frame that covers a stretch of the log), ``view_feed`` (what a correct server sends), ``view_index`` (a run
matched for many views in one pass). Nothing here does I/O.
"""

from __future__ import annotations

from sparkwire.protocol.client_frames import (
    Ack,
    ClientFrame,
    Hello,
    Ping,
    Pong,
    ProtocolError,
    encode_ack,
    encode_heartbeat,
    encode_hello,
    parse_client_frame,
)
from sparkwire.protocol.close_codes import CLOSE_SPECS, CloseCode, close_reason, is_resumable
from sparkwire.protocol.filter_form import Filter, FilterError, canonical_json, filter_id, parse_filter
from sparkwire.protocol.filter_match import compile_filter
from sparkwire.protocol.limits import PROTOCOL_VERSION
from sparkwire.protocol.positions import Cursor, Gap
from sparkwire.protocol.server_frames import (
    AckPolicy,
    EntriesFrame,
    ErrorFrame,
    ReceivedEntry,
    ServerFrame,
    ServerFrameError,
    SnapshotPart,
    UnknownFrame,
    Welcome,
    parse_server_frame,
)
from sparkwire.protocol.view_frames import Removal, ViewEntriesFrame

__all__ = [
    "CLOSE_SPECS", "PROTOCOL_VERSION", "Ack", "AckPolicy", "ClientFrame", "CloseCode", "Cursor", "EntriesFrame",
    "ErrorFrame", "Filter", "FilterError", "Gap", "Hello", "Ping", "Pong", "ProtocolError", "ReceivedEntry", "Removal",
    "ServerFrame", "ServerFrameError", "SnapshotPart", "UnknownFrame", "ViewEntriesFrame", "Welcome",
    "canonical_json", "close_reason", "compile_filter", "encode_ack", "encode_heartbeat", "encode_hello",
    "filter_id", "is_resumable", "parse_client_frame", "parse_filter", "parse_server_frame",
]
