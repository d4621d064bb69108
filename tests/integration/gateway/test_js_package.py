"""The browser client as an npm package (services/sparkwire/client/js): its own tests and type check pass, ``npm pack``
builds a package of the module, its declarations and README, and the client, run under Node, receives a real
gateway's entries exactly once."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import redis as redis_lib

from sparkwire.protocol import CLOSE_SPECS, PROTOCOL_VERSION
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.stack.ports import free_port

from .conftest import Committer, GatewayProcess

PACKAGE = Path(__file__).resolve().parents[3] / "services" / "sparkwire" / "client" / "js"


def npm(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["npm", *args], cwd=PACKAGE, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"npm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def test_npm_test_passes_under_node_with_the_declarations_checked() -> None:
    assert (PACKAGE / "node_modules" / "typescript").is_dir(), "run `make setup` (npm ci of the package)"
    output = npm("test").stdout
    assert "# fail 0" in output and "# pass 0" not in output


def test_npm_pack_builds_the_module_its_types_and_readme() -> None:
    """The module, the React hook and the Vue composable (entry points sparkwire-client/react and /vue, whose
    frameworks are optional peer dependencies: the package depends on nothing at run time), their types."""
    [packed] = json.loads(npm("pack", "--dry-run", "--json").stdout)
    assert packed["name"] == "sparkwire-client"
    assert sorted(f["path"] for f in packed["files"]) == [
        "README.md", "package.json", "react.d.ts", "react.js", "sparkwire-client.d.ts", "sparkwire-client.js",
        "vue.d.ts", "vue.js"]
    manifest = json.loads((PACKAGE / "package.json").read_text())
    assert "dependencies" not in manifest
    assert all(meta["optional"] for meta in manifest["peerDependenciesMeta"].values())
    assert set(manifest["peerDependenciesMeta"]) == set(manifest["peerDependencies"]) == {"react", "vue"}


def follow(gateway: GatewayProcess, committer: Committer, redis: redis_lib.Redis, stream: str,
           *transport_args: str, ws_url: str | None = None) -> dict[str, Any]:
    """test/follow.mjs (the package's client under Node) until 100 live entries are applied; checks they are
    the log's, each once, in order, and returns its report."""
    committer.commit(4)
    committer.start()
    done = subprocess.run(
        ["node", "--experimental-websocket", "test/follow.mjs", ws_url or gateway.ws(stream).split("?")[0], stream,
         "100", *transport_args],
        cwd=PACKAGE, capture_output=True, text=True, timeout=90)
    committer.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    applied = [(seq, pid) for seq, pid in report["applied"]]
    seqs = [seq for seq, _ in applied]
    assert seqs == list(range(seqs[0], seqs[0] + 100)), "a gap or a duplicate"
    logged = {entry.seq: entry.processing_id
              for entry in ReplayLogReader(redis, stream).read_after(seqs[0] - 1, count=100)}
    assert applied == [(seq, logged[seq]) for seq in seqs]
    assert report["stats"]["duplicates"] == 0 and report["stats"]["gaps"] == 0
    return report


def test_the_client_under_node_applies_live_entries_exactly_once(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    assert follow(gateway, committer, redis, unique_name)["stats"]["transport"] == "websocket"


def test_the_client_under_node_over_server_sent_events_applies_live_entries_exactly_once(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    report = follow(gateway, committer, redis, unique_name, "sse")
    assert report["stats"]["transport"] == "sse" and report["stats"]["acksSent"] >= 1
    # No close at all leaves the labelled counter without a sample: 0 then, explicitly.
    closes = gateway.metric("sparkwire_gateway_closes_total", default=0)
    assert closes == 0, "the acks posted were all within what was sent"


def test_a_websocket_that_cannot_open_falls_back_to_server_sent_events(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    nothing_there = f"ws://127.0.0.1:{free_port()}/ws"  # no WebSocket opens here; SSE goes to the gateway
    report = follow(gateway, committer, redis, unique_name, "websocket,sse", f"{gateway.http}/sse",
                    ws_url=nothing_there)
    assert report["stats"]["transport"] == "sse" and report["stats"]["connectionFailures"] == 1


def test_the_package_s_close_codes_and_version_are_the_protocol_s() -> None:
    """The browser client's table (code -> [name, resumable]) against the protocol's, in Node: no browser."""
    exported = subprocess.run(
        ["node", "--input-type=module", "-e",
         "const m = await import('./sparkwire-client.js');"
         "console.log(JSON.stringify({codes: m.CLOSE_CODES, version: m.PROTOCOL_VERSION}))"],
        cwd=PACKAGE, capture_output=True, text=True, timeout=60, check=True).stdout
    document = json.loads(exported)
    assert document["version"] == PROTOCOL_VERSION
    assert {int(code): tuple(spec) for code, spec in document["codes"].items()} == {
        int(code): (code.name.lower(), spec.resumable) for code, spec in CLOSE_SPECS.items()}


def test_the_client_under_node_follows_a_filtered_view_exactly_once(
    gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    """A filter on the key (2 of the committer's 7 keys): the client applies exactly the log's matching entries,
    each once, in order, however many entries between them it never receives (the gaps it must not see)."""
    wanted = {"k1", "k3"}
    committer.commit(4)
    committer.start()
    done = subprocess.run(
        ["node", "--experimental-websocket", "test/follow.mjs", gateway.ws(unique_name).split("?")[0], unique_name,
         "60"],
        cwd=PACKAGE, capture_output=True, text=True, timeout=90,
        env={**os.environ, "SPARKWIRE_FILTER": json.dumps({"$key": {"in": sorted(wanted)}})})
    committer.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    applied = [(seq, pid) for seq, pid in report["applied"]]
    first, last = applied[0][0], applied[-1][0]
    # The oracle: the log itself, filtered here by the entry's key, independently of the gateway's matcher.
    logged = ReplayLogReader(redis, unique_name).read_after(first - 1, count=last - first + 1)
    expected = [(entry.seq, entry.processing_id) for entry in logged if entry.key in wanted]
    assert applied == expected
    assert len(expected) < len(logged), "entries outside the filter lay between them"
    assert report["stats"]["duplicates"] == 0 and report["stats"]["gaps"] == 0
