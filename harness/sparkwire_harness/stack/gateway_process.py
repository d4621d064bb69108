"""A real gateway (``sparkwire gateway`` under uvicorn) as a child process on a free port, and reading one
metric of its ``/metrics``."""

from __future__ import annotations

import difflib
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from .ports import free_port
from .process import ManagedProcess


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


class GatewayProcess:
    """``auth_secret`` turns authentication on; without it the gateway runs with ``--insecure-no-auth``,
    said explicitly as the gateway requires (tests of everything but auth connect without tokens)."""

    def __init__(self, workdir: Path, redis_url: str, streams: list[str], *extra: str,
                 env: dict[str, str] | None = None, auth_secret: str | None = None) -> None:
        self.port = free_port()
        self.auth_secret = auth_secret
        command = [sys.executable, "-m", "sparkwire.cli", "gateway", "--port", str(self.port),
                   "--redis-url", redis_url, "--streams", ",".join(streams), "--pod-name", f"gw-{self.port}",
                   "--drain-ms", "5000", *extra]
        env = dict(env or {})
        if auth_secret is None:
            command += ["--insecure-no-auth"]
        else:
            # As the chart gives it: in the environment, not on the command line the log records.
            env["SPARKWIRE_AUTH_SECRET"] = auth_secret
        self.process = ManagedProcess(f"gateway-{self.port}", command, workdir, env=env)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws(self, stream: str) -> str:
        return f"ws://127.0.0.1:{self.port}/ws?stream={stream}"

    def start(self) -> GatewayProcess:
        self.process.start()
        self.process.wait_ready(lambda: http_status(f"{self.http}/readyz") == 200, timeout=30)
        return self

    def stop(self) -> None:
        self.process.stop()

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"{self.http}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def metric(self, selector: str, *, default: float | None = None) -> float:
        """The value of ``selector`` in this gateway's ``/metrics``: see ``metric_value``."""
        return metric_value(self.metrics_text(), selector, default=default)


class MetricNotFoundError(LookupError):
    """``/metrics`` has no sample for a selector (and no default was allowed for it)."""


_SELECTOR = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?")
_LABEL = re.compile(r'\s*(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*(?:,|$)')
# Sample names a `# TYPE <name> histogram|summary` line declares besides <name> itself.
_SERIES_SUFFIXES = ("_bucket", "_count", "_sum")


def parse_selector(selector: str) -> tuple[str, dict[str, str]]:
    """``name`` or ``name{label="value",...}`` -> (name, labels); ValueError for anything else (a selector cut
    short, as ``name{label="value"`` without its brace, would otherwise read as something it is not)."""
    match = _SELECTOR.fullmatch(selector.strip())
    if match is None:
        raise ValueError(f"not a metric selector: {selector!r} (expected name or name{{label=\"value\",...}})")
    labels: dict[str, str] = {}
    text = match.group("labels") or ""
    position = 0
    while position < len(text):
        label = _LABEL.match(text, position)
        if label is None or label.end() == position:
            raise ValueError(f"bad labels in metric selector {selector!r} at {text[position:]!r}")
        labels[label.group("key")] = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1),
                                            label.group("value"))
        position = label.end()
    return match.group("name"), labels


def _declared(text: str, name: str) -> bool:
    """Whether a ``# TYPE`` line of ``text`` declares the sample name ``name``."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[:2] == ["#", "TYPE"]:
            declared = parts[2]
            if name == declared or (parts[3] in ("histogram", "summary")
                                    and any(name == declared + suffix for suffix in _SERIES_SUFFIXES)):
                return True
    return False


def metric_value(text: str, selector: str, *, default: float | None = None) -> float:
    """The sum of the samples of Prometheus exposition ``text`` whose name is exactly the selector's name and
    whose labels include the selector's (``name`` sums every label set; ``name{code="4408"}`` those with that
    label, whatever other labels they have). A selector no sample matches raises ``MetricNotFoundError``:
    checks such as ``metric(x) >= 0`` must not pass on a metric that is not there. ``default`` is for a caller
    that reads a sample which may legitimately not exist yet (a labelled counter nothing has incremented): it
    is returned only when ``text`` declares the metric (its ``# TYPE`` line); a name not declared at all (a
    typo, a renamed metric) raises even then."""
    name, labels = parse_selector(selector)
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]
    matching = [s for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    if matching:
        return float(sum(s.value for s in matching))
    if not samples and not _declared(text, name):
        names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ") and len(line.split()) > 2}
        similar = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.6)
        raise MetricNotFoundError(f"{name} is not in /metrics at all (a typo or a renamed metric?); names like it:"
                                  f" {', '.join(similar) or 'none'}")
    if default is not None:
        return default
    seen = "; ".join(_label_text(s.labels) for s in samples[:10]) or "none yet"
    raise MetricNotFoundError(f"/metrics declares {name} but has no sample with {_label_text(labels)} (label sets"
                              f" seen: {seen}); a caller that expects it may not exist yet passes default=")


def _label_text(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
