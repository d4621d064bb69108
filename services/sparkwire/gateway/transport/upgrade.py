"""A WebSocket upgrade checked once, from the request uvicorn's HTTP protocol already parsed.

uvicorn hands an upgrade to its WebSocket protocol by writing the request back out as bytes, which websockets
then parses again in Python, validates, and answers with a response it builds as a ``Headers`` object (a
formatted date included, which uvicorn deletes). With thousands of clients connecting at once, that second
parse and response were about a fifth of a handshake's CPU (5,000 clients, 64 handshakes in flight: ~740 ->
~590 µs of the pod's CPU each without them; docs/design-notes.md). A plain upgrade, as every
browser and client library sends it, is checked here from httptools' parse instead, and answered with bytes.

Anything else (another method, no or a malformed key, another version, several values where one is
allowed, a subprotocol asked for, an extension offered while compression is on) is not an error here: it
goes down uvicorn's own path, and websockets answers it as before (400 for a malformed one). So this path only ever
takes what websockets would accept, and its answer is the one websockets would give (tests compare them).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from urllib.parse import unquote

from websockets.utils import accept_key

# Headers of which an upgrade may carry one value only (RFC 6455 4.1, RFC 6454 7.3), as websockets checks.
_SINGLE = (b"sec-websocket-key", b"sec-websocket-version", b"origin")


@dataclass(frozen=True, slots=True)
class PlainUpgrade:
    """An upgrade this path answers: where it asks to go, and the value of its ``Sec-WebSocket-Accept``."""

    path: str
    raw_path: bytes
    query_string: bytes
    accept: str

    def response(self, extra_headers: list[tuple[bytes, bytes]]) -> bytes:
        """The 101 answer (websockets' headers, then uvicorn's defaults and the application's)."""
        lines = [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Accept: ", self.accept.encode(), b"\r\n"]
        for name, value in extra_headers:
            lines += [name, b": ", value, b"\r\n"]
        lines.append(b"\r\n")
        return b"".join(lines)


def plain_upgrade(method: str, url: bytes, headers: list[tuple[bytes, bytes]], *,
                  compression: bool, root_path: str = "") -> PlainUpgrade | None:
    """The upgrade, when ``method``, ``url`` and ``headers`` (names lower-cased, as uvicorn's httptools
    protocol keeps them) make a plain one; None for anything to leave to websockets."""
    if method != "GET":
        return None
    connection: list[bytes] = []
    upgrade: list[bytes] = []
    single: dict[bytes, bytes] = {}
    for name, value in headers:
        if name == b"connection":
            connection += value.split(b",")
        elif name == b"upgrade":
            upgrade += value.split(b",")
        elif name in _SINGLE:
            if name in single:
                return None
            single[name] = value
        elif name == b"sec-websocket-protocol" or (compression and name == b"sec-websocket-extensions"):
            return None
    if not any(token.strip().lower() == b"upgrade" for token in connection):
        return None
    if len(upgrade) != 1 or upgrade[0].strip().lower() != b"websocket":
        return None
    if single.get(b"sec-websocket-version") != b"13":
        return None
    key = single.get(b"sec-websocket-key")
    try:
        if key is None or len(binascii.a2b_base64(key, strict_mode=True)) != 16:
            return None
        text_key = key.decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None
    raw_path, _, query_string = url.partition(b"?")
    try:
        path = raw_path.decode("ascii")
    except UnicodeDecodeError:
        return None
    return PlainUpgrade(path=root_path + (unquote(path) if "%" in path else path),
                        raw_path=root_path.encode("ascii") + raw_path, query_string=query_string,
                        accept=accept_key(text_key))
