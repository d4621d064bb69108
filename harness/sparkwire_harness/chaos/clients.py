"""One process of chaos clients: many ``StreamClient``s as asyncio tasks (200 processes would not fit on
the machine), each recording what it rendered — every entry handed to ``on_entry``, with a digest of
its data — for the verifier. ``python -m sparkwire_harness.chaos.clients PLAN`` (written by ``run.py``).

Client kinds (``schedule.ClientPlan``): steady; slow (renders each entry in 10 ms, blocking, and reads
through a 4 KB socket buffer; a process of its own, the one consumer-freeze faults SIGSTOP); cursor
(leaves, then comes back with the same session object: its old cursor, as a page reload restores it);
session (leaves, then comes back with its state and session id but no cursor, the protocol's
server-side bookmark — a new ``ClientSession``, so a new render segment). Any kind may be filtered or
scoped (the plan's ``filter``, and a token with a ``scope``: ``views.py``): it records the removals it
gets as well, and comes back with the same filter.

While it runs the process writes ``status`` (each client's last seq, or -1 while away) twice a second;
on SIGTERM it stops every client (a last ack each), writes ``report`` and exits. Each client's
connection log (``sparkwire.client`` at INFO: welcomes, closes, reconnect delays) goes to stderr, the
process's log in the run's work dir, one line per event with the time and the client's id.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import signal
import socket
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from sparkwire.client import ClientSession, ReceivedEntry, Removal, StreamClient, TerminalClose

SLOW_RENDER_S = 0.01
SLOW_RCVBUF = 4096

# The client whose task logs: set in each client's task, inherited by the tasks it starts.
CLIENT_ID: contextvars.ContextVar[str] = contextvars.ContextVar("client_id", default="-")


class _ClientIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.client = CLIENT_ID.get()
        return True


def digest(data: object) -> int:
    """The same number for equal results however they were serialised (log, snapshot, entries frame)."""
    return zlib.crc32(json.dumps(data, sort_keys=True, separators=(",", ":")).encode())


def write_json(path: Path, document: object) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(document))
    os.replace(partial, path)  # readers never see half a file


class Tracked:
    """One planned client over its whole life: its segments (one per ``ClientSession``) of rendered
    entries as ``[seq, processingId, digest]``, and the stats of every connection loop it ran."""

    def __init__(self, plan: dict[str, Any], options: dict[str, Any]) -> None:
        self.plan = plan
        self.options = options
        self.segments: list[list[list[object]]] = []
        self.boundaries: list[str] = []  # how each segment after the first began: "session"
        self.removals: list[list[object]] = []  # [seq, key] of every removal that took a key out of the state
        self.finished_sessions: list[dict[str, Any]] = []
        self.loops: list[dict[str, Any]] = []
        self.away = False
        self.terminal: str | None = None
        self.client = self._new_client(None)

    def _on_entry(self, segment: list[list[object]]) -> Any:
        slow = self.plan["kind"] == "slow"

        def on_entry(entry: ReceivedEntry) -> None:
            cursor = self.client.session.cursor  # the entry's epoch: the session takes it before rendering
            segment.append([entry.seq, entry.processing_id, digest(entry.data), cursor.epoch if cursor else ""])
            if slow:
                time.sleep(SLOW_RENDER_S)  # a slow renderer: blocks this process's loop, as a busy tab would

        return on_entry

    def _on_removal(self, removal: Removal) -> None:
        self.removals.append([removal.seq, removal.key])

    def _new_client(self, session: ClientSession | None) -> StreamClient:
        client = StreamClient(self.plan["url"], token=self.plan["token"], filter=self.plan.get("filter"),
                              on_removal=self._on_removal, **self.options)
        if session is None:
            segment: list[list[object]] = []
            self.segments.append(segment)
            client.session.on_entry = self._on_entry(segment)
        else:
            client.session = session
        return client

    def _open_socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SLOW_RCVBUF)  # before connect: the window
        sock.settimeout(5)
        sock.connect(("127.0.0.1", int(self.plan["port"])))
        sock.setblocking(False)
        return sock

    def _session_stats(self, client: StreamClient) -> dict[str, Any]:
        stats = client.stats()
        return {"duplicates": stats.duplicates, "gaps": stats.gaps, "resets": stats.resets}

    async def _run_until(self, client: StreamClient, wake_at: float | None) -> None:
        if self.plan["kind"] == "slow":
            client.open_socket = self._open_socket
        task = asyncio.create_task(client.run())
        pause = asyncio.sleep(max(0.0, wake_at - time.time())) if wake_at else asyncio.Event().wait()
        stopper = asyncio.create_task(pause)
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task not in done:
            await client.stop()
        stopper.cancel()
        try:
            await task
        except TerminalClose as error:
            self.terminal = f"{error!r}"
        stats = client.stats()
        self.loops.append({"reconnects": stats.reconnects, "connects": stats.connects,
                           "closes": {str(k): v for k, v in stats.closes.items()},
                           "failures": stats.connection_failures})

    async def live(self, t0: float) -> None:
        """Run, leave and come back as planned, until cancelled by ``stop`` (then the last loop ends)."""
        CLIENT_ID.set(str(self.plan["id"]))
        client = self.client
        for leave, back in self.plan["absences"]:
            await self._run_until(client, t0 + leave)
            if self.terminal:
                return
            self.away = True
            await asyncio.sleep(max(0.0, t0 + back - time.time()))
            self.away = False
            if self.plan["kind"] == "cursor":
                client = self._new_client(client.session)
            else:
                self.finished_sessions.append(self._session_stats(client))
                old = client.session
                client = self._new_client(None)
                client.session = ClientSession(token=self.plan["token"], session_id=old.session_id,
                                               on_entry=client.session.on_entry, keep_applied=True,
                                               filter=self.plan.get("filter"), on_removal=self._on_removal)
                client.session.state = dict(old.state)  # it keeps what it rendered, not its position
                self.boundaries.append("session")
            self.client = client
        await self._run_until(client, None)

    def report(self) -> dict[str, Any]:
        sessions = [*self.finished_sessions, self._session_stats(self.client)]
        state = {key: [item.seq, item.processing_id, digest(item.data)] for key, item in self.client.state.items()}
        return {"id": self.plan["id"], "kind": self.plan["kind"], "edge": self.plan["edge"],
                "profile": self.plan.get("profile", ""), "removals": self.removals,
                "segments": self.segments, "boundaries": self.boundaries, "state": state,
                "applied": [list(pair) for pair in self.client.applied], "sessions": sessions,
                "loops": self.loops, "terminal": self.terminal}


async def main_async(plan: dict[str, Any]) -> None:
    # keep_applied: the report hands every applied entry to the oracle (a run's worth, not an endless stream).
    options = {"silence_timeout_s": plan["silence_s"], "keep_applied": True}
    tracked = [Tracked(client, options) for client in plan["clients"]]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    tasks = [asyncio.create_task(t.live(plan["t0"])) for t in tracked]
    status_path, report_path = Path(plan["status"]), Path(plan["report"])
    while not stop.is_set():
        seqs = {t.plan["id"]: (-1 if t.away else t.client.session.last_seq) for t in tracked}
        write_json(status_path, {"t": time.time(), "seqs": seqs,
                                 "connected": sum(1 for t in tracked if t.client.stats().connects > 0)})
        try:
            async with asyncio.timeout(0.5):
                await stop.wait()
        except TimeoutError:
            pass
    for t in tracked:
        await t.client.stop()  # its last ack; live() returns once the current loop has ended
    _, away = await asyncio.wait(tasks, timeout=15)
    for task in away:  # still waiting to come back: it stays away
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    write_json(report_path, {"clients": [t.report() for t in tracked]})


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    handler = logging.StreamHandler()
    handler.addFilter(_ClientIdFilter())
    handler.setFormatter(logging.Formatter("%(created).3f client %(client)s: %(message)s"))
    logging.getLogger("sparkwire.client").addHandler(handler)
    logging.getLogger("sparkwire.client").setLevel(logging.INFO)
    asyncio.run(main_async(plan))


if __name__ == "__main__":
    main()
