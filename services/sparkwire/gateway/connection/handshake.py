"""A connection's first steps: its hello (in time, well formed, a valid token), the session it may adopt,
then the welcome and, when the client cannot resume, a snapshot.

Split in two around the hub subscription: ``admit`` runs before it (nothing of the log read yet), ``start``
after it, so nothing committed between the two can be missed. The decision itself is ``decide_start`` in
``recovery.start_plan``, a pure function; this module does the I/O around it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass

from sparkwire.gateway import metrics
from sparkwire.gateway.auth.tokens import Grant, verify_token
from sparkwire.gateway.connection.ack_budget import AckBudget
from sparkwire.gateway.connection.ending import Close
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.recovery.continuity import verify_resume
from sparkwire.gateway.recovery.start_plan import NO_POSITION, StartPlan, decide_start, fit_view
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.store.session_store import SessionPosition, SessionStore
from sparkwire.gateway.transport.contract import FrameSocket, Transport, payload, serialize_text_frames
from sparkwire.protocol.client_frames import Hello, ProtocolError, parse_client_frame
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.scope import ScopeViolation, View, make_view
from sparkwire.protocol.server_frames import AckPolicy, Welcome, encode_welcome
from sparkwire.replaylog.model import Snapshot

# A cursor of the stream's epoch, a little ahead of the log this pod reads: in a Redis failover the pods move
# to the new primary one poll apart, and the writer publishes again a batch the old primary had published
# unreplicated, so a client that read a batch through one pod can reach another whose log lacks it for a
# few seconds. Answering with a snapshot would skip every entry between (a seed-7 chaos run: 28 lost); the
# pod waits this long for its log to reach the cursor, then resumes — or snapshots, as before, if it does not.
CURSOR_AHEAD_WAIT_S = 8.0
CURSOR_AHEAD_POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class Admission:
    """A client let in: its hello, its token's grant (None without auth) and the session it holds, with that
    session's last ack when it adopted an existing one; ``view``: its filter AND its token's scope (None:
    unfiltered, the protocol as before)."""

    hello: Hello
    grant: Grant | None
    session_id: str
    stored: SessionPosition | None
    view: View | None = None

    @property
    def subject(self) -> str:
        return self.grant.subject if self.grant else ""


@dataclass(frozen=True, slots=True)
class Start:
    """Where the connection starts: the epoch its frames carry (empty for a stream not yet written), the
    seq after which entries are due (the resumed cursor, or the snapshot's seq), and the ack policy its
    welcome asked for."""

    epoch: str
    after: int
    acks: AckPolicy


async def admit(socket: FrameSocket, stream: str, sessions: SessionStore,
                settings: ConnectionSettings) -> Admission:
    """The hello, its token checked for ``stream``, and the session: raises ``Close``, ``ProtocolError`` or
    ``AuthError`` for a client that may not go on."""
    hello = await _receive_hello(socket, settings)
    grant = await verify_token(hello.token, settings.auth_secret, stream) if settings.auth_secret else None
    subject = grant.subject if grant else ""
    try:
        view = make_view(grant.scope if grant else None, hello.filter)
    except ScopeViolation as violation:  # refused, not narrowed in silence
        raise ProtocolError(CloseCode.OUTSIDE_SCOPE, violation.reason) from None
    # Keep the hello's session id only if a pod issued it for this stream to the same subject; any other
    # id gets a fresh one, so a client cannot take over a session by naming it.
    if hello.session is not None:
        owner, stored = await sessions.lookup(hello.session, stream)
        if owner == subject:
            return Admission(hello, grant, hello.session, stored, view)
    # 128 random bits as 32 hex digits (as ``uuid4().hex`` was, without its version bits and object: ~2 % of
    # a handshake's CPU when thousands connect at once).
    return Admission(hello, grant, secrets.token_hex(16), None, view)


async def start(socket: FrameSocket, transport: Transport, hub: StreamHub, sessions: SessionStore,
                settings: ConnectionSettings, admission: Admission, acks: AckBudget) -> Start:
    """Mark the session connected, send the welcome (with ``acks``' policy for the connections the hub holds
    now), and the snapshot when the client cannot resume."""
    policy = acks.update(len(hub.subscriptions))
    if admission.view is not None:  # the stream's mode (removals in update mode) known before its feed starts
        await hub.views_ready()
    if admission.hello.cursor is None and admission.stored is None:
        # Nothing to resume (a first connection): a snapshot, whose own epoch and seq the welcome carries, so
        # no read of the stream's meta (one Redis read per two handshakes when thousands connect at once).
        await sessions.connected(admission.session_id, hub.stream, admission.subject)
        snapshot, frames = await _snapshot(hub, settings, admission, NO_POSITION)
        await _send(socket, transport, [_welcome(admission, policy, snapshot.epoch, snapshot.seq, NO_POSITION),
                                        *frames])
        return Start(snapshot.epoch, snapshot.seq, policy)
    meta = await hub.meta()
    # Used even with a cursor: its counts are the baseline of the cumulative ones the acks carry.
    stored = admission.stored
    plan = decide_start(admission.hello.cursor, stored.seq if stored else None, meta,
                        session_epoch=stored.epoch if stored else None)
    deadline = time.monotonic() + CURSOR_AHEAD_WAIT_S
    # Only in a written stream's epoch: a cursor on a stream that is empty (epoch "") was deleted under it.
    while plan.reset == "cursor_ahead" and meta.epoch and time.monotonic() < deadline:
        await asyncio.sleep(CURSOR_AHEAD_POLL_S)
        meta = await hub.meta()
        plan = decide_start(admission.hello.cursor, stored.seq if stored else None, meta,
                            session_epoch=stored.epoch if stored else None)
    cursor = admission.hello.cursor
    position_view = (cursor.view if plan.position_from == "cursor" and cursor is not None
                     else (stored.view or None) if plan.position_from == "session" and stored is not None else None)
    plan = fit_view(plan, position_view, admission.view)
    plan = await _verify(hub, plan, admission)
    await sessions.connected(admission.session_id, hub.stream, admission.subject)
    welcome = _welcome(admission, policy, meta.epoch, meta.last_seq, plan)
    if plan.after_seq is not None:
        await _send(socket, transport, [welcome])
        return Start(meta.epoch, plan.after_seq, policy)
    snapshot, frames = await _snapshot(hub, settings, admission, plan)
    await _send(socket, transport, [welcome, *frames])
    return Start(snapshot.epoch, snapshot.seq, policy)


def _welcome(admission: Admission, policy: AckPolicy, epoch: str, head_seq: int, plan: StartPlan) -> str:
    return encode_welcome(Welcome(
        session=admission.session_id, epoch=epoch, head_seq=head_seq, recovered=plan.recovered,
        reset=None if plan.reset == "none" else plan.reset, ack_every=policy.ack_every,
        ack_interval_ms=policy.ack_interval_ms, view=None if admission.view is None else admission.view.id,
    ))


async def _snapshot(hub: StreamHub, settings: ConnectionSettings, admission: Admission,
                    plan: StartPlan) -> tuple[Snapshot, list[str]]:
    """The snapshot a connection starts from (filtered by its view), counted by why it gets one."""
    metrics.child(metrics.RESETS, hub.stream, plan.reset).inc()
    if admission.view is None:
        return await hub.snapshot(settings.max_server_frame_bytes)
    return await hub.view_snapshot(admission.view, settings.max_server_frame_bytes)


async def _verify(hub: StreamHub, plan: StartPlan, admission: Admission) -> StartPlan:
    """A resume checked against the entry the log holds at its seq, when the position came with that entry's
    digest (``continuity.verify_resume``). Read from the log, never the pod's ring: the ring holds what this
    pod read before, which is exactly what a log that went back no longer holds."""
    cursor, stored = admission.hello.cursor, admission.stored
    digest = (cursor.digest if plan.position_from == "cursor" and cursor is not None
              else stored.digest if plan.position_from == "session" and stored is not None else None)
    if plan.mode != "resume" or not plan.after_seq or not digest:
        return plan
    return verify_resume(plan, digest, await hub.entry_at(plan.after_seq))


async def _send(socket: FrameSocket, transport: Transport, frames: list[str]) -> None:
    """The frames in one write when the transport takes direct writes (``transport.wire``: one
    syscall instead of one per frame, and none of the ASGI send path), else one by one through the socket."""
    if transport.write(serialize_text_frames(frames)):
        return
    for frame in frames:
        await socket.send_text(frame)


async def _receive_hello(socket: FrameSocket, settings: ConnectionSettings) -> Hello:
    try:
        async with asyncio.timeout(settings.hello_timeout_s):
            message = await socket.receive()
    except TimeoutError:
        raise Close(CloseCode.TIMEOUT, "no hello in time") from None
    frame = parse_client_frame(payload(message), settings.max_client_frame_bytes, filters=True)
    if not isinstance(frame, Hello):
        raise ProtocolError(CloseCode.PROTOCOL_VIOLATION, "the first frame must be a hello")
    return frame


def expiry_monotonic(grant: Grant | None) -> float | None:
    """The token's expiry on the monotonic clock the sender wakes by (None without auth)."""
    return None if grant is None else time.monotonic() + grant.expires_at - time.time()
