"""The numbers of the gateway protocol (docs/protocol.md, "Limits"), shared by the server and the clients."""

from __future__ import annotations

import re

PROTOCOL_VERSION = 1
MAX_CLIENT_FRAME_BYTES, MAX_SERVER_FRAME_BYTES = 8192, 1 << 20
# The WebSocket layer reads a client message whole up to this size, so the handler can answer a frame
# over MAX_CLIENT_FRAME_BYTES with an error frame before its 1009; a larger message is cut off by the
# WebSocket layer itself (1009, no error frame) rather than buffered.
MAX_CLIENT_MESSAGE_BYTES = 1 << 16
HELLO_TIMEOUT_S, PING_INTERVAL_S, PONG_TIMEOUT_S = 10.0, 20.0, 30.0
# Clients ack about once a second: every ack is parsed and written to its session by the pod, and at 500
# entries/s an ack per 100 entries was five per client per second, most of a pod's CPU after the sends.
DEFAULT_ACK_EVERY, DEFAULT_ACK_INTERVAL_MS = 1000, 1000
# A pod with many clients asks each to ack less often, so all of them together send about this many acks
# a second (the welcome's ackEvery / ackIntervalMs), up to MAX_ACK_INTERVAL_MS apart.
DEFAULT_ACKS_PER_SECOND, MAX_ACK_INTERVAL_MS = 1000, 10_000
# Seqs are Redis stream id parts: unsigned 64-bit; a cursor past that is not a position.
MAX_SEQ = (1 << 64) - 1
MAX_COUNT = (1 << 63) - 1
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")
MAX_EPOCH_CHARS = 64
# GET /history: the last entries of the log a fresh page loads before going live (`last`, default and cap).
DEFAULT_HISTORY_ENTRIES, MAX_HISTORY_ENTRIES = 2000, 10_000
# Filters (docs/protocol.md, "Filtered subscriptions"): a client's filter, and a token's scope, are
# evaluated against every entry of the stream for every distinct filter a pod holds, so their size is
# bounded: fields named, values listed (all `in` lists together), characters per name or string value,
# and the JSON text of a filter in a query parameter (the hello is bounded by the client frame limit).
MAX_FILTER_FIELDS = 16
MAX_FILTER_VALUES = 256
MAX_FILTER_STRING_CHARS = 256
MAX_FILTER_JSON_BYTES = 4096
# A view with nothing matching still tells its clients how far it has looked, at most this often, so
# their cursors and sessions' acks move past what they do not receive.
VIEW_POSITION_INTERVAL_MS = 1000
