"""The client's memory in a long run: 1,000,000 entries through ``async for entry in client`` leave its
resident set where it was after the first 200,000 (issue 40).

The client runs in a process of its own (``CLIENT``: the real ``StreamClient``, ``ClientSession`` and
websockets stack, with their defaults) and reads its own RSS from ``/proc/self/statm``, and the number of
Python memory blocks alive (``sys.getallocatedblocks``), every 100,000 entries. The server is this test's
process: a stand-in WebSocket server on loopback that speaks the protocol with the gateway's own encoders
(welcome, an empty snapshot, then entries frames made as they are sent; acks read and dropped). Not the
real gateway: a million entries committed through the Lua script into a Redis under ``appendfsync always``,
read back and encoded by a gateway, all on the same two cores as the client, would take minutes (an
estimate, not measured) rather than ~10 s; and what is measured is the client's process, which runs the
same code either way.

The client's process runs with glibc's mmap threshold fixed at 64 KB (``MALLOC_MMAP_THRESHOLD_``). With
glibc's default (a threshold that rises after the first large free) each ~85 KB frame buffer comes from the
heap, whose fragmentation takes ~1.5 million entries to settle: measured, 48 MB of RSS at 200,000 entries,
59 MB at 1,000,000, 62 MB from 1,500,000 to 3,000,000 (flat), while the Python blocks alive stayed within
0.1% all along. Fixed, the large buffers are returned as soon as freed and the RSS after 200,000 entries is
what the client holds; the Python blocks are checked as well, which no allocator setting affects.

Before the fix ``ClientSession.applied`` kept every (seq, processingId). With that one line put back (the
old code has no ``async for`` to run this test with), measured: 74 MB of RSS at 200,000 entries, 203 MB at
1,000,000 (~160 bytes an entry), and 3 Python blocks more an entry; the test fails on both counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from websockets.asyncio.server import ServerConnection, serve

from sparkwire.protocol.items import Entry, Snapshot
from sparkwire.protocol.server_frames import Welcome, encode_entry, encode_snapshot, encode_welcome, pack_entries

ENTRIES = 1_000_000
PER_FRAME = 500
KEYS = 100  # the state holds one item per key: a fixed number of keys, as results keyed by metric or region
WARM_UP = 200_000  # past the dedup memory's 100,000 processingIds: everything the client keeps is full by then
MARGIN_BYTES = 4 << 20  # measured: +0.1 MB; the old code grew by ~129 MB over the same run
MARGIN_BLOCKS = 5_000  # measured: ~+100 of ~300,000; the old code kept 3 more an entry
EVERY = 100_000
REPO = Path(__file__).resolve().parents[3]

CLIENT = """
import asyncio, json, os, sys, time
from sparkwire.client import StreamClient

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


async def main(url: str, total: int, every: int) -> None:
    client = StreamClient(url)
    rss_at: dict[int, list[int]] = {}
    count, start = 0, time.monotonic()
    async for entry in client:
        count += 1
        if entry.seq != count:
            raise SystemExit(f"entry {count} has seq {entry.seq}")
        if count % every == 0:
            rss_at[count] = [rss(), sys.getallocatedblocks()]
        if count == total:
            await client.stop()
    stats = client.stats()
    print(json.dumps({"rss": rss_at, "count": count, "seconds": time.monotonic() - start,
                      "duplicates": stats.duplicates, "gaps": stats.gaps, "reconnects": stats.reconnects,
                      "recent": len(client.recent), "state": len(client.state)}))


asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def frames(after: int, total: int) -> Iterator[str]:
    """Entries ``after + 1`` to ``total`` in frames of ``PER_FRAME``, each a distinct result of one of ``KEYS``
    keys."""
    for first in range(after + 1, total + 1, PER_FRAME):
        batch = [Entry(seq=seq, processing_id=f"q-{seq}", key=f"key-{seq % KEYS}",
                       data=f'{{"n":{seq},"pad":"{"x" * 40}"}}', commit_ms=1_700_000_000_000 + seq, batch_id=seq)
                 for seq in range(first, min(first + PER_FRAME, total + 1))]
        yield from pack_entries("e1", [encode_entry(entry) for entry in batch])


async def serve_and_follow(total: int) -> dict[str, object]:
    async def handler(ws: ServerConnection) -> None:
        hello = json.loads(await ws.recv())
        # A fresh client first; one that resumes (its keepalive ping unanswered for 20 s when this machine is
        # very busy: the pong waits behind megabytes of frames) goes on after its cursor.
        cursor = hello.get("cursor")
        after = int(cursor["seq"]) if cursor else 0

        async def drop_acks() -> None:
            async for _ in ws:
                pass

        reader = asyncio.create_task(drop_acks())
        await ws.send(encode_welcome(Welcome(
            session="long-run", epoch="e1", head_seq=total, recovered=cursor is not None,
            reset=None if cursor else "no_position", ack_every=100, ack_interval_ms=1000)))
        if cursor is None:
            for part in encode_snapshot(Snapshot(epoch="e1", seq=0, items={})):
                await ws.send(part)
        for frame in frames(after, total):
            await ws.send(frame)  # waits while the client's socket buffers are full
            await asyncio.sleep(0)  # else a send that need not wait never lets this loop read the client's pings
        await reader  # until the client closes

    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, f"ws://127.0.0.1:{port}/ws?stream=s", str(total), str(EVERY),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
            env={**os.environ, "MALLOC_MMAP_THRESHOLD_": str(64 << 10)})
        stdout, stderr = await asyncio.wait_for(client.communicate(), 150)
    assert client.returncode == 0, stderr.decode()[-3000:]
    result: dict[str, object] = json.loads(stdout)
    return result


def test_a_million_entries_through_async_for_leave_the_clients_rss_flat_after_warm_up() -> None:
    started = time.monotonic()
    result = asyncio.run(serve_and_follow(ENTRIES))
    measured: dict[str, list[int]] = result.pop("rss")  # type: ignore[assignment]
    rss = {int(count): rss_bytes for count, (rss_bytes, _blocks) in measured.items()}
    blocks = {int(count): alive for count, (_rss, alive) in measured.items()}
    mib = {count: round(value / (1 << 20), 1) for count, value in rss.items()}
    report = (f"RSS MiB by entries applied: {mib}; Python blocks alive: {blocks}; {result}; "
              f"{time.monotonic() - started:.1f} s in all")
    print(report)
    assert result["count"] == ENTRIES and result["duplicates"] == result["gaps"] == 0, report
    assert result["state"] == KEYS and result["recent"] == 1_000, report
    assert max(v for count, v in blocks.items() if count >= WARM_UP) - blocks[WARM_UP] < MARGIN_BLOCKS, report
    assert max(v for count, v in rss.items() if count >= WARM_UP) - rss[WARM_UP] < MARGIN_BYTES, report
