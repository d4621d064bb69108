"""A client that stops keeping up is closed with the resumable slow-consumer code, resumes and loses
nothing, while a healthy client on the same pod keeps receiving in real time."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.parse
from pathlib import Path

import redis as redis_lib

from sparkwire.client import BackgroundClient, StreamClient
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.server_frames import ReceivedEntry
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.stack import Committer, GatewayProcess, RedisServer

STALL_S = 6.0


class SlowClient(BackgroundClient):
    """Its entry callback blocks for ``STALL_S`` once ``slow`` is set: the client's loop stops reading the
    socket, as a browser tab stuck rendering would, then reads on at full speed."""

    def __init__(self, url: str) -> None:
        self.slow = threading.Event()
        super().__init__(url, on_entry=self._on_entry, open_socket=lambda: _small_buffer_socket(url),
                         keep_applied=True)

    def _on_entry(self, entry: ReceivedEntry) -> None:
        if self.slow.is_set():
            self.slow.clear()
            time.sleep(STALL_S)


def test_a_slow_client_is_closed_resumes_and_loses_nothing_while_others_are_unaffected(
    redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name], "--send-queue", "8").start()
    # ~1 KB entries at ~2,000/s: a reader that stalls fills the loopback socket buffers within seconds.
    committer = Committer(redis, unique_name, per_batch=50, interval=0.025, payload_bytes=1000)
    committer.commit()
    slow = SlowClient(gateway.ws(unique_name)).start()
    lags_ms: list[int] = []

    def record_lag(entry: ReceivedEntry) -> None:
        lags_ms.append(int(time.time() * 1000) - entry.commit_ms)

    healthy = StreamClient(gateway.ws(unique_name), on_entry=record_lag, keep_applied=True)

    async def run() -> None:
        task = asyncio.create_task(healthy.run())
        await healthy.wait_until(lambda: healthy.cursor is not None, timeout=10)  # snapshot applied
        committer.start()
        slow.slow.set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and CloseCode.SLOW_CONSUMER not in _closes(slow):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)
        committer.stop()
        last = committer.committed
        await healthy.wait_until(lambda: healthy.applied[-1][0] == last, timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and slow.last_seq != last:
            await asyncio.sleep(0.1)
        await healthy.stop()
        await task

    try:
        asyncio.run(run())
    finally:
        slow.stop()
        committer.stop()
        gateway.stop()

    expected = [(e.seq, e.processing_id) for e in ReplayLogReader(redis, unique_name).iter_all()]
    slow_stats = slow.client.stats()
    assert CloseCode.SLOW_CONSUMER in slow_stats.closes, slow_stats
    assert slow_stats.terminal is None
    # It resumed from its cursor: the whole log once, in order, no snapshot after the first connect.
    seqs = [seq for seq, _ in slow.client.applied]
    assert seqs == list(range(seqs[0], expected[-1][0] + 1))
    assert slow.client.applied == expected[seqs[0] - 1:]
    assert (slow_stats.duplicates, slow_stats.gaps) == (0, 0)
    assert set(slow_stats.resets) <= {"no_position"}
    # The healthy client on the same pod never reconnected and stayed close to real time.
    healthy_stats = healthy.stats()
    assert healthy.applied == expected[len(expected) - len(healthy.applied):]
    assert healthy_stats.reconnects == 0 and healthy_stats.closes == {}, healthy_stats
    lags_ms.sort()
    assert lags_ms[int(len(lags_ms) * 0.99)] < 1000, f"healthy client p99 lag {lags_ms[int(len(lags_ms) * 0.99)]} ms"


def _small_buffer_socket(url: str) -> socket.socket:
    """Loopback sockets buffer tens of MB (autotuned); a small receive buffer makes the stalled reader push
    back on the gateway within seconds, as a slow network would."""
    address = urllib.parse.urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
    sock.connect((address.hostname, address.port))
    return sock


def _closes(slow: SlowClient) -> dict[int, int]:
    return slow.client.stats().closes
