"""The WebSocket gateway: serves a stream's replay log to browsers, replay then live, exactly once.

Its rooms, in a connection's order (each package's docstring says more):

* ``transport/``: the socket under a connection (a WebSocket under sparkwire's uvicorn protocol or plain ASGI,
  or Server-Sent Events), the ``/ws`` and ``/sse`` endpoints, and how a close is sent;
* ``connection/``: one connection from its hello to its close (``lifecycle``, ``handshake``, ``sender``,
  ``receiver``, ``ending``);
* ``recovery/``: where a connection starts, the replay/live junction and continuity — pure, no I/O
  (docs/protocol.md);
* ``fanout/``: one reader per stream (``hub``) and each connection's mailbox (``subscription``);
* ``store/``: client sessions, shared round trips and the replication watch;
* ``http/``: snapshot, history, streams, descriptor, probes, metrics and the dashboard page;
* ``auth/``: signed client tokens and ``sparkwire token``.

The pod puts them together: ``pod.Gateway`` (its state, which connections it takes, serving one),
``app.create_app`` (the routes), ``server`` (``sparkwire gateway``: uvicorn, drain on SIGTERM); ``settings``
(its options), ``metrics``, ``tasks``. The protocol itself (frames, close codes) is ``sparkwire.protocol``.
"""

from __future__ import annotations
