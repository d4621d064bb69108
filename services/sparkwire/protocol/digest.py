"""An entry's digest: 16 hex digits that tell one entry from another under the same (epoch, seq).

The cursor a client resumes from carries the digest of the entry at its seq (docs/protocol.md, "Continuity"),
so a gateway can prove that the log it reads still holds *that* entry there: after a double failure (a lagging
replica promoted, the writer dead before its checkpoint) a re-run may publish other values under the same seqs
in the same epoch, which seqs alone cannot tell apart.

The first 8 bytes of SHA-1 over the processingId, a newline and the entry's data exactly as the log stores it
(UTF-8). SHA-1 because Redis's Lua has it (``redis.sha1hex``): the log's own script that declares a rewind
(``replaylog/lua/declare_rewind.lua``) computes the same digest atomically. It proves continuity, not
authenticity: nothing here is a secret.
"""

from __future__ import annotations

import hashlib
import re

DIGEST_CHARS = 16
DIGEST = re.compile(r"[0-9a-f]{16}\Z")


def entry_digest(processing_id: str, data: str) -> str:
    """The digest of the entry with ``processing_id`` and ``data`` (the log's JSON text, not re-encoded)."""
    text = f"{processing_id}\n{data}".encode("utf-8", "surrogatepass")
    return hashlib.sha1(text, usedforsecurity=False).hexdigest()[:DIGEST_CHARS]
