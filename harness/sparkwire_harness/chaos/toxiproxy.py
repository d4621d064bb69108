"""Toxiproxy (github.com/Shopify/toxiproxy, built by ``make setup`` into ``.cache/toxiproxy``) as a child
process, and the few calls of its HTTP API a chaos run makes: create a proxy, add and remove a toxic.

Each network fault of a run is one toxic on one proxy (``FAULT_TOXICS``):

* latency: every chunk held ``latency`` ± ``jitter`` ms, both directions;
* blackhole: ``timeout`` with timeout 0 — data is dropped and nothing is closed, so neither side notices
  until its own timeout; removing it closes the connections that went through it (toxiproxy's cleanup),
  as a healed link delivers the reset of a peer that gave up;
* reset: ``reset_peer`` — connections with traffic are reset (RST), new ones too while it lasts;
* slow: ``bandwidth`` of ``rate`` KB/s towards the connecting side;
* cut: ``limit_data`` — connections close after ``bytes`` more bytes towards the connecting side, almost
  always in the middle of a WebSocket frame.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_fixed

from sparkwire_harness.stack import ManagedProcess, SetupMissingError, cache_dir, free_port

# Toxic of the schedule -> (toxiproxy type, streams it goes on, fixed attributes).
FAULT_TOXICS: dict[str, tuple[str, tuple[str, ...], dict[str, int]]] = {
    "latency": ("latency", ("upstream", "downstream"), {}),
    "blackhole": ("timeout", ("upstream", "downstream"), {"timeout": 0}),
    "reset": ("reset_peer", ("upstream", "downstream"), {"timeout": 0}),
    "slow": ("bandwidth", ("downstream",), {}),
    "cut": ("limit_data", ("downstream",), {}),
}


def toxiproxy_server_executable() -> Path:
    binary = cache_dir() / "toxiproxy" / "bin" / "toxiproxy-server"
    if not binary.is_file():
        raise SetupMissingError(f"toxiproxy-server not found at {binary}: run `make setup` (it builds it with Go)")
    return binary


class ToxiproxyError(RuntimeError):
    pass


class Toxiproxy:
    """``toxiproxy-server`` on 127.0.0.1 with its API on ``api_port``; proxies listen on 127.0.0.1 too."""

    def __init__(self, workdir: Path) -> None:
        self.api_port = free_port()
        command = [str(toxiproxy_server_executable()), "-host", "127.0.0.1", "-port", str(self.api_port)]
        # One debug line per API call and per connection otherwise.
        self.process = ManagedProcess("toxiproxy", command, workdir, env={"LOG_LEVEL": "warn"})
        self.listen_ports: dict[str, int] = {}
        self._upstream_ports: dict[str, int] = {}
        self._restart_lock = threading.Lock()
        self.restarts = 0

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def _call(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.api}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise ToxiproxyError(f"{method} {path}: {error.code} {error.read().decode(errors='replace')}") from error
        try:
            return json.loads(text) if text.strip() else None
        except ValueError:  # /version answers plain text
            return text

    def start(self) -> None:
        self.process.start()
        self.process.wait_ready(lambda: self._call("GET", "/version") is not None, timeout=15)

    def stop(self) -> None:
        self.process.stop()

    def create_proxy(self, name: str, upstream_port: int, listen_port: int | None = None) -> int:
        """A proxy from 127.0.0.1:``listen_port`` (a free one by default) to 127.0.0.1:``upstream_port``."""
        port = listen_port if listen_port is not None else free_port()
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{port}",
                                        "upstream": f"127.0.0.1:{upstream_port}", "enabled": True})
        self.listen_ports[name] = port
        self._upstream_ports[name] = upstream_port
        return port

    def restart(self) -> None:
        """Toxiproxy SIGKILLed and started again with every proxy on its listen port, no toxic: every
        connection through it is reset at once. The way out when its API is wedged (a toxic's link waits on
        a peer that died, holding the lock every API call needs: Shopify/toxiproxy#558, unfixed in the 2.5.0
        the Go module proxy serves), since a toxic that cannot be removed would outlive the run."""
        with self._restart_lock:
            self.process.kill()
            self.start()
            for name, upstream in self._upstream_ports.items():
                self.create_proxy(name, upstream, listen_port=self.listen_ports[name])
            self.restarts += 1

    def repoint(self, name: str, upstream_port: int) -> None:
        """Send the proxy's new connections to 127.0.0.1:``upstream_port`` (a Service moving to a promoted
        node); toxiproxy closes the ones it holds."""
        self._call("POST", f"/proxies/{name}", {"upstream": f"127.0.0.1:{upstream_port}"})

    def add_fault(self, proxy: str, name: str, toxic: str, params: dict[str, int]) -> list[str]:
        """The toxics of one network fault (``FAULT_TOXICS``); returns their names (``toxic_names``)."""
        kind, streams, fixed = FAULT_TOXICS[toxic]
        for stream, toxic_name in zip(streams, toxic_names(name, toxic), strict=True):
            self._call("POST", f"/proxies/{proxy}/toxics", {
                "name": toxic_name, "type": kind, "stream": stream, "toxicity": 1.0,
                "attributes": {**fixed, **params},
            })
        return toxic_names(name, toxic)

    # Toxiproxy's API can stall for a while when a toxic goes on or off a proxy that carries heavy traffic
    # (Shopify/toxiproxy#159, #412: it waits for the link's goroutines); a heal must still happen, so a
    # removal is retried for a minute before the run is told it failed.
    @retry(retry=retry_if_exception_type((OSError, TimeoutError)), stop=stop_after_delay(60),
           wait=wait_fixed(1), reraise=True)
    def _delete(self, proxy: str, toxic_name: str) -> None:
        try:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic_name}")
        except ToxiproxyError as error:
            if " 404 " not in f" {error} ":  # absent: never added (its add failed) or removed already
                raise

    def remove(self, proxy: str, names: list[str]) -> None:
        for toxic_name in names:
            self._delete(proxy, toxic_name)


def toxic_names(name: str, toxic: str) -> list[str]:
    """The names ``add_fault(proxy, name, toxic, ...)`` gives its toxics: known before it is called, so a
    fault whose injection failed part-way is still removed whole."""
    return [f"{name}-{stream}" for stream in FAULT_TOXICS[toxic][1]]


class ToxiproxyRestarted(RuntimeError):
    """A fault was healed by restarting toxiproxy (its API stalled past the retries): reported with the run."""


def remove_all(toxiproxy: Toxiproxy, toxics: list[tuple[str, list[str]]]) -> None:
    """Every (proxy, toxic names) removed, the later ones too when an earlier removal fails. When one could
    not be removed (the API stalled for the whole retry), toxiproxy is restarted without any toxic and
    ``ToxiproxyRestarted`` says so."""
    failures: list[Exception] = []
    for proxy, names in toxics:
        try:
            toxiproxy.remove(proxy, names)
        except Exception as error:
            failures.append(error)
    if failures:
        toxiproxy.restart()
        raise ToxiproxyRestarted(f"healed by restarting toxiproxy, its API stalled: {failures[0]!r}")
