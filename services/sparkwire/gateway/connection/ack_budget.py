"""How often one stream's clients on this pod are asked to ack: about ``--acks-per-second`` in all, as the
pod's connection count moves.

A client's welcome carries the policy for the count at its handshake (``ConnectionSettings.ack_policy``). A
policy fixed at the welcome does not hold the budget: the clients that connected first, while the pod was
nearly empty, kept acking every second after thousands joined. After a ramp to 10,000 clients the pod got
~3,000 acks a second, not the 1,000 asked (15,000 in 5 s; ~3,300 with this), and parsing and storing them
took CPU from a fan-out that already needs most of the core (docs/benchmarks.md). So the budget
re-advertises: when the count has moved the policy by half or double, a new policy replaces it, and every
connection's next frame is preceded by an ``acks`` frame carrying it (the sender's ``_send_frames``; the
hub's write-through leaves such a batch to the sender). Only at those steps (a handful on a ramp from 0 to
10,000), so a connection count that wobbles does not send frames for nothing.
"""

from __future__ import annotations

from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.protocol.server_frames import AckPolicy, encode_ack_policy

# A new policy replaces the current one when its interval is this many times longer or shorter.
STEP = 2


class AckBudget:
    """The policy now asked of one stream's clients (``policy``, an object shared by every connection that
    has it, so a connection tells a stale one by identity) and its ``acks`` frame."""

    __slots__ = ("_settings", "frame", "policy")

    def __init__(self, settings: ConnectionSettings) -> None:
        self._settings = settings
        self.policy = AckPolicy(*settings.ack_policy(0))
        self.frame = encode_ack_policy(self.policy)

    def update(self, connections: int) -> AckPolicy:
        """The policy for a pod with ``connections`` of this stream: the current one unless the count moved
        it by ``STEP``."""
        every, interval_ms = self._settings.ack_policy(connections)
        current = self.policy.ack_interval_ms
        if interval_ms >= current * STEP or interval_ms * STEP <= current:
            self.policy = AckPolicy(every, interval_ms)
            self.frame = encode_ack_policy(self.policy)
        return self.policy


__all__ = ["STEP", "AckBudget"]
