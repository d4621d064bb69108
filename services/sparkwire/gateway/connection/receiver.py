"""A connection's receiving side: the client's frames handled in the transport's callback as they are
parsed (no task, no queue). Acks move the session's bookmark and carry the client's duplicate and gap
counts; pings are answered at once; anything else, or a bad frame, ends the subscription."""

from __future__ import annotations

import time

from sparkwire.gateway import metrics
from sparkwire.gateway.connection.handshake import Admission
from sparkwire.gateway.connection.sender import Sender
from sparkwire.gateway.store.session_store import SessionPosition, SessionStore
from sparkwire.gateway.transport.contract import Message, payload
from sparkwire.protocol.client_frames import Ack, Ping, Pong, ProtocolError, encode_heartbeat, parse_client_frame
from sparkwire.protocol.close_codes import CloseCode


class Receiver:
    # Slots: thousands of idle connections each kept a dict of these.
    __slots__ = ("error", "last_ack", "max_frame_bytes", "reported", "sender", "session_id", "sessions", "stream",
                 "subject", "ttl_refreshed", "view")

    def __init__(self, sender: Sender, sessions: SessionStore, admission: Admission, max_frame_bytes: int) -> None:
        self.sender = sender
        self.sessions = sessions
        self.stream = sender.hub.stream
        self.session_id = admission.session_id
        self.subject = admission.subject
        self.view = "" if admission.view is None else admission.view.id  # kept with the session's acks
        self.max_frame_bytes = max_frame_bytes
        stored = admission.stored
        # The adopted session's counts: the baseline of the cumulative ones this client's acks carry.
        self.reported = (stored.duplicates, stored.gaps) if stored else (0, 0)
        self.last_ack = sender.delivered
        self.ttl_refreshed = time.monotonic()  # when this connection last set its session's TTL (connected)
        self.error: BaseException | None = None  # what ended the client's side, re-raised by the connection

    def on_message(self, message: Message) -> None:
        """One message from the client. Whatever ends the client's side is kept in ``error`` and ends the
        subscription."""
        sender = self.sender
        subscription = sender.subscription
        if subscription.ended is not None:
            return
        try:
            sender.timers.last_heard = time.monotonic()
            frame = parse_client_frame(payload(message), self.max_frame_bytes)
            if isinstance(frame, Ack):
                self._on_ack(frame)
            elif isinstance(frame, Ping):
                if not sender.transport.reply(encode_heartbeat(Pong(frame.t))):  # closing, or pinging without reading
                    subscription.end("slow_consumer")
            elif not isinstance(frame, Pong):
                raise ProtocolError(CloseCode.PROTOCOL_VIOLATION, "a second hello on one connection")
        except Exception as error:
            self.error = error
            subscription.end("receiver")

    def _on_ack(self, ack: Ack) -> None:
        delivered = self.sender.delivered
        if ack.seq > delivered or ack.seq < self.last_ack:
            raise ProtocolError(CloseCode.PROTOCOL_VIOLATION,
                                f"ack of seq {ack.seq} outside {self.last_ack}..{delivered}")
        duplicates, gaps = self.reported
        if ack.duplicates > duplicates:
            metrics.CLIENT_DUPLICATES.labels(stream=self.stream).inc(ack.duplicates - duplicates)
        if ack.gaps > gaps:
            metrics.CLIENT_GAPS.labels(stream=self.stream).inc(ack.gaps - gaps)
        self.reported = (max(duplicates, ack.duplicates), max(gaps, ack.gaps))
        self.last_ack = ack.seq
        refresh_ttl = self.sessions.ttl_refresh_due(self.ttl_refreshed)
        if refresh_ttl:
            self.ttl_refreshed = time.monotonic()
        position = SessionPosition(self.sender.epoch, ack.seq, *self.reported, ack.digest or "", self.view)
        self.sessions.acked(self.session_id, self.stream, position, self.subject, refresh_ttl=refresh_ttl)
