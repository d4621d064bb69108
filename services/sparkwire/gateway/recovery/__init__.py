"""Recovery, pure: where a connection starts (``start_plan``), the replay/live junction (``junction``), and
whether the log still holds the entry a position ends at (``continuity``). No I/O: the connection's handshake
and sender and the hub do the reads around these decisions (docs/protocol.md)."""
