"""What the gateway fan-out benchmark's worker processes (``_fanout_loadgen``) and its measuring side
(``_fanout_measure``, ``gateway_fanout``) agree on: the stream and the latency histogram's buckets."""

from __future__ import annotations

STREAM = "bench"
HIST_PER_MS = 10  # latency histogram: 0.1 ms buckets
HIST_SIZE = 120_000 * HIST_PER_MS  # up to 120 s, the last bucket holds everything slower
