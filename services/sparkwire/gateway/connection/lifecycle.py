"""One client connection, from its hello to its close: ``handshake`` lets it in and starts it (resume or
snapshot), the ``Sender`` (its only task) sends history merged with live, the ``Receiver`` handles its
frames in the transport's callback, and ``ending`` closes it with the code that says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from starlette.websockets import WebSocketDisconnect

from sparkwire.gateway import metrics
from sparkwire.gateway.auth.tokens import AuthError
from sparkwire.gateway.connection import handshake
from sparkwire.gateway.connection.ack_budget import AckBudget
from sparkwire.gateway.connection.ending import Close
from sparkwire.gateway.connection.receiver import Receiver
from sparkwire.gateway.connection.sender import Sender, Timers
from sparkwire.gateway.connection.view_sender import ViewSender
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.fanout.subscription import Subscription
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.gateway.transport.closing import send_close
from sparkwire.gateway.transport.contract import FrameSocket, Transport
from sparkwire.protocol.client_frames import ProtocolError
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.replaylog.port import UNAVAILABLE

log = logging.getLogger(__name__)


class Connection:
    __slots__ = ("acks", "draining", "hub", "sessions", "settings", "socket", "transport")

    def __init__(self, socket: FrameSocket, transport: Transport, hub: StreamHub, sessions: SessionStore,
                 settings: ConnectionSettings, draining: asyncio.Event, acks: AckBudget) -> None:
        """``acks``: the stream's ack budget on this pod, shared by its connections."""
        self.acks = acks
        self.socket = socket
        self.transport = transport
        self.hub = hub
        self.sessions = sessions
        self.settings = settings
        self.draining = draining

    async def serve(self) -> None:
        """Run until the client leaves or a ``Close`` is raised; never lets an error escape."""
        try:
            await self._serve()
        except Exception as error:
            code, reason = _close_for(error)
            release(error)
        else:
            return
        if code is not None:
            await send_close(self.socket, code, reason)
            metrics.child(metrics.CLOSES, str(int(code))).inc()

    async def _serve(self) -> None:
        now = time.monotonic()
        timers = Timers(next_ping=now + self.settings.ping_interval_s, expires_at_monotonic=None, last_heard=now)
        admission = await handshake.admit(self.socket, self.hub.stream, self.sessions, self.settings)
        timers.expires_at_monotonic = handshake.expiry_monotonic(admission.grant)
        subscription = self.hub.subscribe()  # before any read, so nothing committed from now on is missed
        try:
            start = await handshake.start(self.socket, self.transport, self.hub, self.sessions, self.settings,
                                          admission, self.acks)
            sender = (Sender(self.socket, self.transport, self.hub, subscription, self.settings, timers,
                             admission.grant, start.epoch, start.after, acks=self.acks, acks_sent=start.acks)
                      if admission.view is None
                      else ViewSender(self.socket, self.transport, self.hub, subscription, self.settings, timers,
                                      admission.grant, start.epoch, start.after, admission.view, acks=self.acks,
                                      acks_sent=start.acks))
            receiver = Receiver(sender, self.sessions, admission, self.settings.max_client_frame_bytes)
            # Send until the subscription ends (awaited here, not in a helper: an idle connection keeps every
            # coroutine frame it waits in). The sender's task is the connection's only one: the client's
            # frames are handled as they arrive (the receiver), and the hub writes live batches through
            # while the sender waits for them (``Sender.write_through``).
            if self.draining.is_set():  # drained between the accept and the subscribe
                subscription.end("draining")
            subscription.write_through = sender.write_through
            self.transport.listen(receiver.on_message)
            try:
                await sender.run()
            finally:
                self.transport.listen(None)
                subscription.write_through = None
                subscription.disarm_lane()
        finally:
            self.hub.unsubscribe(subscription)
            self.acks.update(len(self.hub.subscriptions))  # fewer clients: each may ack more often
            # The client may reconnect to another pod at once: its last ack must be there first.
            with contextlib.suppress(*UNAVAILABLE):
                await self.sessions.flush(only=(admission.session_id, self.hub.stream))
        raise self._close_for_ending(subscription, receiver)

    def _close_for_ending(self, subscription: Subscription, receiver: Receiver) -> BaseException:
        """What ends the connection once its subscription ended: the ``Close`` its ending maps to, or the
        receiver's error (a bad frame, the client leaving)."""
        ending = subscription.ended
        if ending == "receiver" and receiver.error is not None:
            return receiver.error
        if ending == "slow_consumer":
            metrics.SLOW_CONSUMER_CLOSES.labels(stream=self.hub.stream).inc()
        return Close.for_ending(ending)


def _close_for(error: Exception) -> tuple[CloseCode | None, str]:
    """The close code and reason a connection ended by ``error`` gets (None: the client is gone)."""
    if isinstance(error, Close):
        return error.code, error.reason
    if isinstance(error, (ProtocolError, AuthError)):
        return error.code, error.reason
    if isinstance(error, (WebSocketDisconnect, ConnectionError)):
        return None, ""
    if isinstance(error, UNAVAILABLE):
        metrics.REDIS_ERRORS.labels(operation="connection").inc()
        return CloseCode.REDIS_UNAVAILABLE, f"redis unavailable: {type(error).__name__}"
    log.error("connection failed", exc_info=error)
    return CloseCode.INTERNAL_ERROR, "internal error"


def release(error: BaseException) -> None:
    """Drop the tracebacks of ``error`` and the errors it chains, once handled. A traceback holds the frames
    it went through, their locals are the connection's objects, and one of them refers back to the error (the
    receiver keeps what ended the client's side): a cycle that only a full collection frees. When 10,000
    clients left at once, that collection took the pod 1.0-1.2 s, everyone else waiting (docs/benchmarks.md).
    (Not ``traceback.clear_frames``: an error from a shared round trip (``batched``) has frames of a task still
    running, which clearing would finalize.)"""
    seen: set[int] = set()
    chained: BaseException | None = error
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        chained.with_traceback(None)  # not an assignment: some errors are frozen dataclasses (AuthError)
        chained = chained.__context__ or chained.__cause__
