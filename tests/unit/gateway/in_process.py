"""A whole gateway in process for the tests (Starlette's ``TestClient`` over the in-memory log, plain ASGI, no
Redis, no subprocess): the app the in-process test modules drive, built one way."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from starlette.testclient import TestClient

from sparkwire.gateway.app import create_app
from sparkwire.gateway.auth.tokens import Auth
from sparkwire.gateway.pod import Gateway
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.replaylog.memory import MemoryBackend

STREAM = "metrics"


@contextlib.contextmanager
def running_gateway(auth: Auth = "") -> Iterator[tuple[TestClient, MemoryBackend]]:
    """A gateway serving ``STREAM`` from a fresh in-memory log, its token check ``auth`` ("" for none): small
    pages (50), a small ring (100) and acks every 10 entries, so short tests cross those edges."""
    backend = MemoryBackend()
    settings = ConnectionSettings(ack_every=10, ack_interval_ms=1000, hello_timeout_s=5, max_client_frame_bytes=8192,
                                  max_server_frame_bytes=1 << 20, page_size=50, auth_secret=auth)
    sessions = SessionStore(backend.sessions, ttl_seconds=60, pod="in-process", flush_interval_s=0.05)
    app = create_app(Gateway(backend=backend, streams=[STREAM], connection=settings, sessions=sessions,
                             allowed_origins=frozenset(), ring_size=100, send_queue=256))
    with TestClient(app) as client:
        yield client, backend
