"""A plain upgrade checked once (``transport.upgrade``): taken exactly when websockets would accept it, with
websockets' answer, and anything unusual left to websockets."""

from __future__ import annotations

import base64

import pytest
from websockets.http11 import Request
from websockets.server import ServerProtocol

from sparkwire.gateway.transport.upgrade import plain_upgrade

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 1.3's sample, whose accept value the RFC gives
BROWSER = [
    (b"host", b"gateway:8080"), (b"connection", b"Upgrade"), (b"pragma", b"no-cache"), (b"upgrade", b"websocket"),
    (b"origin", b"https://app.example"), (b"sec-websocket-version", b"13"), (b"sec-websocket-key", KEY),
    (b"sec-websocket-extensions", b"permessage-deflate; client_max_window_bits"),
]


def websockets_answer(method: str, url: bytes, headers: list[tuple[bytes, bytes]]) -> int | None:
    """The status websockets' own parse and accept give the same request (None: it does not parse it)."""
    raw = method.encode() + b" " + url + b" HTTP/1.1\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in headers)
    protocol = ServerProtocol()
    protocol.receive_data(raw + b"\r\n")
    events = protocol.events_received()
    if not events or not isinstance(events[0], Request):
        return None
    return protocol.accept(events[0]).status_code


def test_a_browsers_upgrade_is_taken_with_the_rfcs_accept_value_and_its_path_split() -> None:
    upgrade = plain_upgrade("GET", b"/ws?stream=metrics%2Fa", BROWSER, compression=False)
    assert upgrade is not None
    assert upgrade.accept == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    assert (upgrade.path, upgrade.raw_path, upgrade.query_string) == ("/ws", b"/ws", b"stream=metrics%2Fa")
    assert plain_upgrade("GET", b"/a%20b", BROWSER, compression=False, root_path="/gw").path == "/gw/a b"  # type: ignore[union-attr]


def test_its_answer_is_websockets_101_with_the_extra_headers_after() -> None:
    upgrade = plain_upgrade("GET", b"/ws", BROWSER, compression=False)
    assert upgrade is not None
    response = upgrade.response([(b"server", b"uvicorn")])
    protocol = ServerProtocol()
    protocol.receive_data(b"GET /ws HTTP/1.1\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in BROWSER) + b"\r\n")
    theirs = protocol.accept(protocol.events_received()[0])  # type: ignore[arg-type]
    del theirs.headers["Date"]
    theirs.headers["server"] = "uvicorn"
    assert response == theirs.serialize()


def replaced(name: bytes, value: bytes | None) -> list[tuple[bytes, bytes]]:
    kept = [(n, v) for n, v in BROWSER if n != name]
    return kept if value is None else [*kept, (name, value)]


LEFT_TO_WEBSOCKETS = {
    "no key": ("GET", replaced(b"sec-websocket-key", None)),
    "a key not base64": ("GET", replaced(b"sec-websocket-key", b"not base64!!")),
    "a key of 15 bytes": ("GET", replaced(b"sec-websocket-key", base64.b64encode(b"x" * 15))),
    "two keys": ("GET", [*BROWSER, (b"sec-websocket-key", KEY)]),
    "version 8": ("GET", replaced(b"sec-websocket-version", b"8")),
    "no version": ("GET", replaced(b"sec-websocket-version", None)),
    "two origins": ("GET", [*BROWSER, (b"origin", b"https://other.example")]),
    "no upgrade token in Connection": ("GET", replaced(b"connection", b"keep-alive")),
    "another protocol": ("GET", replaced(b"upgrade", b"h2c")),
    "two protocols": ("GET", replaced(b"upgrade", b"websocket, h2c")),
    "a POST": ("POST", BROWSER),
}


@pytest.mark.parametrize("case", sorted(LEFT_TO_WEBSOCKETS))
def test_anything_unusual_is_left_to_websockets_which_refuses_it(case: str) -> None:
    method, headers = LEFT_TO_WEBSOCKETS[case]
    assert plain_upgrade(method, b"/ws", headers, compression=False) is None
    assert websockets_answer(method, b"/ws", headers) in (None, 400, 405, 426)


def test_what_asks_for_negotiation_is_left_to_websockets_though_valid() -> None:
    assert plain_upgrade("GET", b"/ws", [*BROWSER, (b"sec-websocket-protocol", b"chat")], compression=False) is None
    assert plain_upgrade("GET", b"/ws", BROWSER, compression=True) is None  # an offer to negotiate
    without_offer = replaced(b"sec-websocket-extensions", None)
    assert plain_upgrade("GET", b"/ws", without_offer, compression=True) is not None


@pytest.mark.parametrize("connection", [b"keep-alive, Upgrade", b"upgrade", b"UPGRADE"])
def test_what_it_takes_websockets_accepts_too(connection: bytes) -> None:
    headers = replaced(b"connection", connection)
    assert plain_upgrade("GET", b"/ws?x=1", headers, compression=False) is not None
    assert websockets_answer("GET", b"/ws?x=1", headers) == 101
