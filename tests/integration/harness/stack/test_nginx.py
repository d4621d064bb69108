"""nginx as the local ingress: round-robin over upstreams, a killed upstream skipped, WebSocket upgrades
passed through with Origin and X-Forwarded-For."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.typing import Origin

from sparkwire_harness.stack import ManagedProcess, NginxBalancer, free_port


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


def http_upstream(root: Path, name: str) -> tuple[ManagedProcess, int]:
    """``python -m http.server`` serving an index that names it."""
    folder = root / name
    folder.mkdir()
    (folder / "index.html").write_text(name)
    port = free_port()
    process = ManagedProcess(
        f"http-{name}", [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], folder
    )
    process.start()
    process.wait_ready(lambda: get(f"http://127.0.0.1:{port}/")[1] == name, timeout=15)
    return process, port


@pytest.fixture
def two_upstreams(tmp_path: Path) -> Iterator[tuple[NginxBalancer, list[ManagedProcess]]]:
    upstreams = [http_upstream(tmp_path, name) for name in ("pod-a", "pod-b")]
    nginx = NginxBalancer(tmp_path / "nginx", [port for _, port in upstreams])
    try:
        nginx.start()
        yield nginx, [process for process, _ in upstreams]
    finally:
        nginx.stop()
        for process, _ in upstreams:
            process.stop()


def test_healthz_is_answered_by_nginx_itself(two_upstreams: tuple[NginxBalancer, list[ManagedProcess]]) -> None:
    nginx, _ = two_upstreams
    assert get(f"{nginx.url}/healthz") == (200, "ok\n")


def test_requests_go_round_robin_over_the_upstreams(two_upstreams: tuple[NginxBalancer, list[ManagedProcess]]) -> None:
    nginx, _ = two_upstreams
    answers = Counter(get(f"{nginx.url}/")[1] for _ in range(6))
    assert answers == {"pod-a": 3, "pod-b": 3}


def test_a_killed_upstream_is_skipped(two_upstreams: tuple[NginxBalancer, list[ManagedProcess]]) -> None:
    nginx, (pod_a, _) = two_upstreams
    pod_a.kill()
    answers = [get(f"{nginx.url}/") for _ in range(6)]
    assert answers == [(200, "pod-b")] * 6
    assert "Connection refused" in nginx.log_tail()


def test_a_websocket_upgrade_passes_through_with_origin_and_forwarded_for(tmp_path: Path) -> None:
    async def handler(ws: ServerConnection) -> None:
        headers = ws.request.headers if ws.request is not None else {}
        await ws.send(json.dumps({"origin": headers.get("Origin"), "xff": headers.get("X-Forwarded-For")}))
        async for message in ws:
            await ws.send(message)

    async def main() -> None:
        upstream_port = free_port()
        async with serve(handler, "127.0.0.1", upstream_port):
            nginx = NginxBalancer(tmp_path / "nginx", [upstream_port])
            await asyncio.to_thread(nginx.start)
            try:
                async with connect(f"{nginx.ws_url}/ws?stream=s", origin=Origin("http://app.example")) as ws:
                    headers = json.loads(await ws.recv())
                    assert headers == {"origin": "http://app.example", "xff": "127.0.0.1"}
                    await ws.send("hello through nginx")
                    assert await ws.recv() == "hello through nginx"
            finally:
                await asyncio.to_thread(nginx.stop)

    asyncio.run(main())
