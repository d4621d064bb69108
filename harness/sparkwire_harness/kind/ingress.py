"""The cluster's ingress (Traefik at SPARKWIRE_KIND_HTTP), the way every client of the suite comes in."""

from __future__ import annotations

import urllib.error
import urllib.request

from .settings import HTTP

_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the ingress is local: no proxy


def http_get(path: str, host: str | None = None) -> tuple[int, str]:
    """GET through the ingress; ``host`` is the Host header it routes by, when the Ingress names hosts."""
    request = urllib.request.Request(f"{HTTP}{path}", headers={"Host": host} if host else {})
    try:
        with _direct.open(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def ws_url(stream: str, http: str = HTTP) -> str:
    """A stream's WebSocket URL through the ingress."""
    return f"{http.replace('http', 'ws', 1)}/ws?stream={stream}"
