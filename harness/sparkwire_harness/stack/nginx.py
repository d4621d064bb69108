"""A local ``nginx`` in front of several gateway pods, configured like an ingress-nginx for WebSockets and
Server-Sent Events.

It is how the tests see what a browser sees in production: connections spread round-robin over the
pods, a dead pod skipped within a second, upgrades passed through and held open for an hour; SSE requests
kept on one pod by the client's affinity key (``X-Sparkwire-Affinity``, ingress-nginx's ``upstream-hash-by``)
and never buffered. With ``block_websockets`` it is the proxy some users sit behind: every upgrade refused.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from .paths import SetupMissingError
from .ports import free_port
from .process import ManagedProcess

UPSTREAM_NAME = "sparkwire_gateway"


def _nginx_executable() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/bin:/usr/local/sbin")
    if found is None:
        raise SetupMissingError("nginx not found: run `make setup` (it apt-installs nginx)")
    return found


def render_config(workdir: Path, port: int, upstream_ports: Sequence[int], *, block_websockets: bool = False) -> str:
    """The nginx.conf text: everything nginx writes (pid, logs, temp files) stays under ``workdir``."""
    work = Path(workdir).resolve()
    return (_process_settings(work)
            + "\nhttp {\n" + _http_settings(work) + _upstreams(upstream_ports) + _server(port, block_websockets)
            + "}\n")


def _process_settings(work: Path) -> str:
    """The master and its one worker: in the foreground, its pid file and error log under ``work``."""
    # A master running as root switches its workers to "nobody", who could not write the temp folders.
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    return f"""# Written by sparkwire_harness.stack.nginx; regenerated on every start.
{user}daemon off;
master_process on;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log info;

events {{
    worker_connections 1024;
}}
"""


def _http_settings(work: Path) -> str:
    """The access log and temp folders under ``work``; the Connection header an upgrade needs."""
    temp = work / "temp"
    return f"""    access_log {work}/access.log;
    client_body_temp_path {temp}/client_body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;

    # Upgrade requests get "Connection: upgrade", the rest "close", as ingress-nginx does.
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}

"""


def _upstreams(upstream_ports: Sequence[int]) -> str:
    """The gateways twice: round-robin for WebSockets and plain HTTP, hashed on the affinity key for SSE."""
    servers = "\n".join(
        # max_fails=0, as ingress-nginx does (it follows the endpoints instead): nginx never takes a
        # server out of rotation by itself; a refused connect goes to the next server
        # (proxy_next_upstream). With max_fails=1, every server restarted within fail_timeout of each
        # other left the upstream "no live upstreams" for as long as clients kept retrying.
        f"        server 127.0.0.1:{upstream} max_fails=0;"
        for upstream in upstream_ports
    )
    return f"""    upstream {UPSTREAM_NAME} {{
{servers}
    }}

    # SSE: the event stream and the frames a client posts to it must reach the same pod. Consistent hashing
    # on the client's affinity key keeps them together; a dead pod's clients move to the next one.
    upstream {UPSTREAM_NAME}_sse {{
        hash $http_x_sparkwire_affinity consistent;
{servers}
    }}

"""


def _server(port: int, block_websockets: bool) -> str:
    """The listener: nginx's own /healthz, /sse to the hashed upstream, the rest (WebSockets) round-robin."""
    # A proxy that does not pass WebSockets: the upgrade is refused before any upstream sees it.
    refuse_upgrades = "if ($http_upgrade) { return 403; }" if block_websockets else "# upgrades passed through"
    return f"""    server {{
        listen 127.0.0.1:{port};

        # nginx's own liveness, answered without any upstream.
        location = /healthz {{
            access_log off;
            default_type text/plain;
            return 200 "ok\\n";
        }}

        location /sse {{
            proxy_pass http://{UPSTREAM_NAME}_sse;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header Origin $http_origin;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_connect_timeout 1s;
            proxy_next_upstream error timeout;
            # An event stream stays open through quiet stretches (the protocol's pings keep it alive) and
            # each frame must go out as it comes: never buffered.
            proxy_read_timeout 3600s;
            proxy_buffering off;
        }}

        location / {{
            {refuse_upgrades}
            proxy_pass http://{UPSTREAM_NAME};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_set_header Origin $http_origin;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            # A killed pod refuses or never answers the connect: try the next one after at most 1 s.
            proxy_connect_timeout 1s;
            proxy_next_upstream error timeout;
            # WebSockets stay open for long quiet stretches; the protocol's pings keep them alive.
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            proxy_buffering off;
        }}
    }}
"""


class NginxBalancer:
    """``nginx`` on 127.0.0.1:``port`` balancing round-robin over 127.0.0.1:``upstream_ports``."""

    def __init__(self, workdir: Path, upstream_ports: Sequence[int], port: int | None = None, *,
                 block_websockets: bool = False) -> None:
        if not upstream_ports:
            raise ValueError("nginx needs at least one upstream port")
        self.workdir = Path(workdir).resolve()
        self.upstream_ports = list(upstream_ports)
        self.block_websockets = block_websockets
        self.port = port if port is not None else free_port()
        self.config_path = self.workdir / "nginx.conf"
        self.error_log_path = self.workdir / "error.log"
        command = [
            _nginx_executable(),
            "-c", str(self.config_path),
            "-p", str(self.workdir),
            # Startup errors go here too, not to /var/log/nginx (before the config is even read).
            "-e", str(self.error_log_path),
        ]  # fmt: skip
        self.process = ManagedProcess("nginx", command, self.workdir)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def accepts_connections(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
            return True

    def write_config(self) -> None:
        for folder in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.workdir / "temp" / folder).mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render_config(self.workdir, self.port, self.upstream_ports,
                                                  block_websockets=self.block_websockets))

    def start(self, timeout: float = 15.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self.process.start()
        self.process.wait_ready(self.accepts_connections, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self.process.stop(timeout)  # SIGTERM: nginx's fast shutdown, open WebSockets are cut

    def kill(self) -> None:
        self.process.kill()

    def log_tail(self, lines: int = 50) -> str:
        """nginx's error log (where upstream failures are reported), else its console output."""
        try:
            text = self.error_log_path.read_text(errors="replace")
        except FileNotFoundError:
            return self.process.log_tail(lines)
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> NginxBalancer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
