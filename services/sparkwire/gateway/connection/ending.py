"""Why a connection ends: the ``Close`` a handshake, the sender or the receiver raises, and the close each
ending of a subscription maps to (the close itself is sent by ``transport.closing``)."""

from __future__ import annotations

from sparkwire.protocol.close_codes import CloseCode

# How each ending of a subscription (``Subscription.end``) closes the connection; "receiver" is not here:
# what ended the receiver is re-raised instead.
ENDINGS: dict[str, tuple[CloseCode, str]] = {
    "slow_consumer": (CloseCode.SLOW_CONSUMER, "send queue overflowed"),
    "stream_reset": (CloseCode.STREAM_RESET, "stream epoch changed"),
    # The log went back in the same epoch (a lagging replica promoted): a new epoch was declared for it.
    "stream_rewound": (CloseCode.STREAM_RESET, "stream rewound: the log went back, new epoch"),
    "draining": (CloseCode.GOING_AWAY, "pod draining"),
    "timeout": (CloseCode.TIMEOUT, "no frame from the client in time"),
    "token_expired": (CloseCode.TOKEN_EXPIRED, "token expired"),
}


class Close(Exception):
    """End the connection with ``code``; a close the client caused gets an ``error`` frame first."""

    def __init__(self, code: CloseCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason

    @classmethod
    def for_ending(cls, ending: str | None) -> Close:
        code, reason = ENDINGS.get(ending or "", (CloseCode.INTERNAL_ERROR, "connection ended"))
        return cls(code, reason)
