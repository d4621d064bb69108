"""The three servers of the side-by-side benchmark and their publishers, and the Go binaries they need.

* ``sparkwire``: the gateway as ``sparkwire_harness.stack.GatewayProcess`` runs it (``sparkwire gateway``, uvicorn,
  ``--insecure-no-auth``), fed by ``sparkwire_harness.stack.Committer`` through the real commit script.
* ``centrifuge``: bench/peers/centrifuge (the Centrifugo engine with its Redis broker, history and recovery),
  fed by the same binary's ``publish`` command (a separate process, as a Centrifugo backend would be).
* ``naive``: bench/peers/naive_pubsub.py, fed by ``PUBLISH`` of one message per commit.

Every server runs pinned to one CPU (``taskset``) when the machine has two or more, the load generator on
another, so the server's CPU figure is not shared with the clients.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import pace

from sparkwire.replaylog import Record
from sparkwire.replaylog.keys import StreamKeys
from sparkwire_harness.stack import Committer, ManagedProcess, RedisServer, cache_dir, free_port, http_status, repo_root

STREAM = "bench"  # sparkwire's stream, centrifuge's channel and the naive pub/sub channel alike
BENCH_DIR = Path(__file__).resolve().parent
BIN_DIR = cache_dir() / "bench"
GO_BINARIES = {"loadgen": "./loadgen", "centrifuge-peer": "./peers/centrifuge"}
SERVER_CPU, LOADGEN_CPU = "0", "1"
# The benchmark's Redis (one for every server): the harness's (AOF, fsync always) without its automatic AOF
# rewrite. Redis starts one when the file has doubled past 64 MB, which a long run can reach at a moment no
# one chose: a fork and a child writing the whole dataset beside fsync-always commits, within one server's
# phase and not the others'.
REDIS_ARGS = ["--auto-aof-rewrite-percentage", "0"]


def pinned(command: list[str], cpu: str) -> list[str]:
    """``command`` under ``taskset -c cpu`` when there are CPUs to separate (taskset execs: same pid)."""
    if (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        return command
    return ["taskset", "-c", cpu, *command]


def go_binary(name: str) -> Path:
    """The Go binary ``name``, built into .cache/bench/ if missing or older than its sources (go.sum pins
    the modules; the build cache is kept in .cache/ too)."""
    target = BIN_DIR / name
    sources = [p for p in BENCH_DIR.rglob("*") if p.suffix == ".go" or p.name in ("go.mod", "go.sum")]
    if target.exists() and all(p.stat().st_mtime <= target.stat().st_mtime for p in sources):
        return target
    if shutil.which("go") is None:
        raise SystemExit(f"{target} is missing and `go` is not installed")
    BIN_DIR.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOCACHE": str(cache_dir() / "go-build"), "GOFLAGS": "-mod=readonly -buildvcs=false"}
    print(f"building {name} ...", file=sys.stderr)
    subprocess.run(["go", "build", "-o", str(target), GO_BINARIES[name]], cwd=BENCH_DIR, env=env, check=True)
    return target


@dataclass
class Server:
    """One running server instance on a fixed port (a restart keeps the port)."""

    kind: str
    port: int
    process: ManagedProcess

    @property
    def pid(self) -> int:
        pid = self.process.pid
        assert pid is not None, "server not started"
        return pid

    @property
    def url(self) -> str:
        path = "/connection/websocket" if self.kind == "centrifuge" else "/ws"
        query = f"?stream={STREAM}" if self.kind == "sparkwire" else ""
        return f"ws://127.0.0.1:{self.port}{path}{query}"

    def start(self) -> Server:
        self.process.start()
        self.process.wait_ready(lambda: http_status(f"http://127.0.0.1:{self.port}/readyz") == 200, timeout=60)
        return self

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()


def make_server(kind: str, redis: RedisServer, workdir: Path, name: str = "") -> Server:
    port = free_port()
    if kind == "sparkwire":  # the command GatewayProcess builds, on a port and CPU of our choosing
        command = [sys.executable, "-m", "sparkwire.cli", "gateway", "--port", str(port), "--redis-url", redis.url,
                   "--streams", STREAM, "--pod-name", f"gw-{port}", "--drain-ms", "1000",
                   "--insecure-no-auth"]
    elif kind == "centrifuge":
        command = [str(go_binary("centrifuge-peer")), "serve", "--port", str(port),
                   "--redis", f"127.0.0.1:{redis.port}"]
    elif kind == "naive":
        command = [sys.executable, str(BENCH_DIR / "peers" / "naive_pubsub.py"), "--port", str(port),
                   "--redis-url", redis.url]
    else:
        raise ValueError(f"unknown server {kind!r}")
    process = ManagedProcess(f"{kind}{name}-{port}", pinned(command, SERVER_CPU), workdir)
    return Server(kind, port, process)


class TenantCommitter(Committer):
    """``Committer`` whose result at seq s (record n = s - 1 of a stream it alone writes) carries
    ``"tenant": "t<n mod tenants>"`` first: what the load generator's filtered clients select on (their
    filter ``{"tenant": "t<i mod K>"}``, bench/loadgen/view.go). The same stream feeds unfiltered clients."""

    tenants = 0  # 0: the plain ``Committer``'s records

    def _record(self, n: int) -> Record:
        if not self.tenants:
            return super()._record(n)
        tenant = f"t{n % self.tenants}"
        value: dict[str, object] = {"tenant": tenant, "n": n}
        if self.payload_bytes:  # the same size as the plain record's: the tenant field comes out of the pad
            pad = random.Random(n).randbytes(self.payload_bytes // 2).hex()
            value["pad"] = pad[:max(len(pad) - len(f'"tenant": "{tenant}", '), 0)]
        return Record(f"pid-{n:08d}", f"k{n % 7}", json.dumps(value))


class Publisher:
    """Publishes ``per_commit`` messages of ``payload_bytes`` every ``interval`` s for a server kind and
    knows the last position published (sparkwire seq, centrifuge offset, naive seq)."""

    def __init__(self, kind: str, redis: RedisServer, payload_bytes: int, interval: float) -> None:
        self.kind, self.redis, self.interval = kind, redis, interval
        self.payload_bytes = payload_bytes
        self.client = redis.client()
        self.committer = TenantCommitter(self.client, STREAM, per_batch=1, payload_bytes=padding_for(payload_bytes))
        self.naive_seq = 0
        self.offset = 0
        self.pad = "x" * max(payload_bytes - len('{"n":10000,"pad":""}'), 0)

    def prime(self) -> None:
        """A first message, so a stream/channel exists before any server starts."""
        if self.kind == "sparkwire":
            self.committer.commit()
        elif self.kind == "centrifuge":
            self.run(1, 0.05)

    def run(self, per_commit: int, seconds: float, start_at: float | None = None) -> tuple[int, float]:
        """Publish for ``seconds`` on a fixed schedule (from ``start_at``, a ``time.time()``, when given: every
        server's publisher on the same wall-clock grid); returns (messages, elapsed seconds)."""
        if self.kind == "sparkwire":
            commits, elapsed = pace(lambda: self.committer.commit(), per_commit, self.interval, seconds,
                                    lambda n: setattr(self.committer, "per_batch", n), start_at)
            return commits * per_commit, elapsed
        if self.kind == "naive":
            commits, elapsed = pace(lambda: self._naive(per_commit), per_commit, self.interval, seconds,
                                    start_at=start_at)
            return commits * per_commit, elapsed
        grid = [] if start_at is None else ["--start-at-ms", str(round(start_at * 1000))]
        out = subprocess.run([str(go_binary("centrifuge-peer")), "publish", "--redis", f"127.0.0.1:{self.redis.port}",
                              "--per-batch", str(per_commit), "--interval-ms", str(round(self.interval * 1000)),
                              "--seconds", str(seconds), "--payload-bytes", str(self.payload_bytes), *grid],
                             capture_output=True, text=True, check=True).stdout
        result = json.loads(out)
        if start_at is not None and result.get("lateMs", 0) > self.interval * 1000 / 4:
            print(f"warning: the centrifuge publisher started {result['lateMs']} ms after its schedule",
                  file=sys.stderr)
        self.offset = max(self.offset, int(result["offset"]))
        return int(result["published"]), float(result["seconds"])

    def run_in_background(self, per_commit: int, seconds: float,
                          start_at: float | None = None) -> Callable[[], tuple[int, float]]:
        """``run`` in a thread; the returned function waits for it and gives its result."""
        box: list[tuple[int, float]] = []
        thread = threading.Thread(target=lambda: box.append(self.run(per_commit, seconds, start_at)), daemon=True)
        thread.start()

        def wait() -> tuple[int, float]:
            thread.join()
            return box[0]

        return wait

    def _naive(self, count: int) -> None:
        first = self.naive_seq + 1
        entries = ",".join(f'{{"n":{first + i},"pad":"{self.pad}"}}' for i in range(count))
        self.client.publish(STREAM, f'{{"t":{int(time.time() * 1000)},"s":{first},"c":{count},"d":[{entries}]}}')
        self.naive_seq += count

    def head(self) -> int:
        if self.kind == "sparkwire":
            return int(self.client.hget(StreamKeys(STREAM).meta, "last_seq") or 0)
        return self.offset if self.kind == "centrifuge" else self.naive_seq

    def close(self) -> None:
        self.client.close()


def padding_for(target: int) -> int:
    """Committer pads ``{"n": n, "pad": "x..."}``; padding so that a 5-digit n gives ``target`` bytes."""
    return max(0, target - len(json.dumps({"n": 10_000, "pad": ""})))


__all__ = ["STREAM", "Publisher", "Server", "go_binary", "make_server", "pinned", "repo_root"]
