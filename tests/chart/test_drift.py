"""Chart vs code: the environment the chart gives the gateway and the Spark driver is made of options the
code reads, every option is either set by the chart or deliberately left alone, the chart's defaults mean
what the code's defaults mean, and the alerts and the dashboard use metric names the code exports."""

from __future__ import annotations

import argparse
import base64
import json
import re
from typing import Any

import pytest
import redis
import redis.asyncio as redis_async

from sparkwire.cli import build_parser
from sparkwire.gateway.recovery.start_plan import RESET_REASONS
from sparkwire.options import OptionSpec, option_specs

from .conftest import CHART, CI_VALUES, FULLNAME, NAMESPACE, Obj, env_of, find, render

# Options the chart sets to something else than the code's default, on purpose.
CHART_CHOICES = {
    "gateway": {
        "--redis-url": "the Redis the chart deploys (or redis.external)",
        "--pod-name": "the pod's own name (downward API)",
        "--auth-secret": "from a Secret (generated unless given), unless gateway.auth.enabled=false",
    },
    "aggregate": {
        "--bootstrap-servers": "kafka.bootstrapServers or the in-chart broker",
        "--redis-url": "the Redis the chart deploys (or redis.external)",
        "--checkpoint": "the checkpoint PVC's mount path",
        "--master": "empty: spark-submit under the operator sets the master",
        "--metrics-port": "on (the code's default 0 is off): the driver is scraped",
    },
}
# Options the chart never sets (the code's default applies), and why.
NOT_SET = {
    "gateway": {
        "--host": "0.0.0.0: the pod listens on all its interfaces",
        "--auth-secret-file": "the chart gives the secret in SPARKWIRE_AUTH_SECRET, from its Secret (secretKeyRef)",
        "--auth-jwks-url": "only with gateway.auth.jwks.url, instead of the secret (tests/chart/test_auth_idp.py)",
        "--auth-public-key-file": "only with gateway.auth.publicKey.existingSecret, instead of the secret "
                                  "(tests/chart/test_auth_idp.py)",
        "--auth-issuer": "only when gateway.auth.issuer is set (required with an identity provider's keys)",
        "--auth-audience": "only when gateway.auth.audience is set (required with an identity provider's keys)",
        "--redis-timeout-ms": "the default (10 s) bounds a silent Redis link for every install: it only has to "
                              "stay above the readers' 1 s blocking read and a snapshot read",
    },
    "aggregate": {
        "--spark-jars": "the image has the Kafka connector on Spark's classpath (images/README.md)",
        "--driver-memory": "only for a driver this process starts (--master set); under the operator the "
                           "SparkApplication's aggregator.driver.memory sets the heap",
        "--class-archive": "only for a driver this process starts (--master set); the image has no archive "
                           "(a JVM started by spark-submit gets its options from the SparkApplication)",
        "--driver-java-options": "only for a driver this process starts (--master set); under the operator the "
                                 "SparkApplication's aggregator.driver.javaOptions (same default, C1 only)",
        "--partition-idle-ms": "the default (60 s) outlasts a Kafka leader failover; the producer's heartbeats "
                               "keep every partition sending",
        "--partition-skew-ms": "the default (twice the delay) follows aggregator.watermarkDelayMs",
    },
}
# Environment variables the chart adds that are not options: only for Kubernetes' $(VAR) expansion.
HELPER_ENV = {"REDIS_PASSWORD"}


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: argparse.ArgumentParser = action.choices[command]
            return sub
    raise AssertionError("sparkwire has no subcommands")


def _specs(command: str) -> dict[str, OptionSpec]:
    return {spec.env: spec for spec in option_specs(_subparser(command))}


def gateway_container(objects: list[Obj]) -> Obj:
    containers: list[Obj] = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "gateway")


def driver_container(objects: list[Obj]) -> Obj:
    app = find(objects, "SparkApplication", f"{FULLNAME}-aggregator")
    containers: list[Obj] = app["spec"]["driver"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "spark-kubernetes-driver")


CONTAINERS = {"gateway": gateway_container, "aggregate": driver_container}
SCENARIOS = [pytest.param(None, id="defaults")] + [pytest.param(p, id=p.stem) for p in CI_VALUES]


@pytest.mark.parametrize("values", SCENARIOS)
@pytest.mark.parametrize("command", ["gateway", "aggregate"])
def test_every_variable_the_chart_sets_is_an_option_of_the_command(command: str, values: Any) -> None:
    env = env_of(CONTAINERS[command](render([values] if values else [])))
    known = set(_specs(command))
    unknown = {name for name in env if name.startswith("SPARKWIRE_")} - known
    assert not unknown, f"the chart sets {sorted(unknown)}, which `sparkwire {command}` does not read " \
                        f"(renamed flag?); it reads {sorted(known)}"
    assert {name for name in env if not name.startswith("SPARKWIRE_")} <= HELPER_ENV


@pytest.mark.parametrize("command", ["gateway", "aggregate"])
def test_every_option_is_set_by_the_chart_or_deliberately_left_alone(command: str) -> None:
    """A new flag fails here until the chart exposes it (values.yaml, schema, template) or NOT_SET says why."""
    env = env_of(CONTAINERS[command](render([CHART / "ci" / "auth-ingress-values.yaml"])))
    for spec in _specs(command).values():
        assert (spec.env in env) != (spec.flag in NOT_SET[command]), (
            f"`sparkwire {command} {spec.flag}`: the chart must either set {spec.env} or list it in NOT_SET"
        )
    stale = set(CHART_CHOICES[command]) | set(NOT_SET[command])
    assert stale <= {spec.flag for spec in _specs(command).values()}, "CHART_CHOICES/NOT_SET name a gone flag"


def _parse_or_fail(command: str, env: dict[str, Obj], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """What the command would run with: its parser reads SPARKWIRE_* when it is built."""
    for name, entry in env.items():
        if "value" in entry:
            monkeypatch.setenv(name, entry["value"])
    try:
        return build_parser().parse_args([command])
    except SystemExit as exc:  # parser.error on a value its type rejects
        raise AssertionError(f"`sparkwire {command}` rejects the chart's environment: {exc}") from exc


@pytest.mark.parametrize("command", ["gateway", "aggregate"])
def test_chart_defaults_mean_the_code_defaults(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsed by the code's own option types: ring size, send queue, drain seconds, stream, topics,
    window, ... default to the same thing in values.yaml as in the code."""
    env = env_of(CONTAINERS[command](render()))
    args = _parse_or_fail(command, env, monkeypatch)
    compared = []
    for spec in _specs(command).values():
        if spec.env not in env or spec.flag in CHART_CHOICES[command]:
            continue
        dest = spec.flag.lstrip("-").replace("-", "_")
        assert getattr(args, dest) == spec.default, (
            f"{spec.flag}: values.yaml gives {getattr(args, dest)!r}, the code's default is {spec.default!r}")
        compared.append(spec.flag)
    assert len(compared) >= 5, compared


@pytest.mark.parametrize("values", SCENARIOS)
@pytest.mark.parametrize("command", ["gateway", "aggregate"])
def test_every_scenario_parses(command: str, values: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _parse_or_fail(command, env_of(CONTAINERS[command](render([values] if values else []))), monkeypatch)


def test_the_driver_runs_under_spark_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _parse_or_fail("aggregate", env_of(driver_container(render())), monkeypatch)
    assert args.master == "" and args.spark_jars == ""
    assert args.metrics_port > 0
    assert args.checkpoint == "/var/lib/sparkwire/checkpoint"


@pytest.mark.parametrize("command", ["gateway", "aggregate"])
def test_redis_url_with_the_password_expanded_parses(command: str) -> None:
    """Kubernetes expands $(REDIS_PASSWORD) only from variables listed before it; redis-py's from_url
    (sync: the driver, asyncio: the gateway) must then take the URL apart."""
    objects = render()
    env = list(CONTAINERS[command](objects)["env"])
    names = [e["name"] for e in env]
    assert names.index("REDIS_PASSWORD") < names.index("SPARKWIRE_REDIS_URL")
    secret = find(objects, "Secret", "sw-sparkwire-redis")
    password = base64.b64decode(secret["data"]["redis-password"]).decode()
    assert re.fullmatch(r"[A-Za-z0-9]{32}", password)
    template = env[names.index("SPARKWIRE_REDIS_URL")]["value"]
    url = template.replace("$(REDIS_PASSWORD)", password)
    for client in (redis.Redis.from_url(url), redis_async.Redis.from_url(url)):
        kwargs = client.connection_pool.connection_kwargs
        assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs["password"]) == (
            f"sw-sparkwire-redis.{NAMESPACE}.svc", 6379, 0, password)


def _exposed_metric_names() -> set[str]:
    """Sample names the gateway and the aggregator export (counters gain _total, histograms
    _bucket/_sum/_count), from the collectors the code defines."""
    from prometheus_client.metrics import MetricWrapperBase

    from sparkwire.gateway import metrics as gateway_metrics
    from sparkwire.spark import metrics as aggregator_metrics

    suffixes = {"counter": ("_total", "_created"), "gauge": ("",), "info": ("_info",),
                "histogram": ("_bucket", "_sum", "_count", "_created")}
    names: set[str] = set()
    for module in (gateway_metrics, aggregator_metrics):
        for collector in vars(module).values():
            if isinstance(collector, MetricWrapperBase):
                for family in collector.describe():
                    names |= {family.name + suffix for suffix in suffixes[family.type]}
    return names


def _rules() -> list[Obj]:
    objects = render([CHART / "ci" / "observability-values.yaml"])
    return [rule for group in find(objects, "PrometheusRule")["spec"]["groups"] for rule in group["rules"]]


def test_alerts_use_metrics_the_code_exports() -> None:
    exposed = _exposed_metric_names()
    used: set[str] = set()
    for rule in _rules():
        names = set(re.findall(r"\bsparkwire_[a-z_]+\b", rule["expr"]))
        assert names <= exposed, f"{rule['alert']} uses {sorted(names - exposed)}, not exported by the code"
        used |= names
    for required in ("sparkwire_client_reported_duplicates_total", "sparkwire_client_reported_gaps_total",
                     "sparkwire_gateway_gaps_detected_total", "sparkwire_gateway_resets_total",
                     "sparkwire_gateway_redis_errors_total", "sparkwire_gateway_head_seq", "sparkwire_sink_last_seq",
                     "sparkwire_redis_primary_changes_total", "sparkwire_redis_replicas_connected",
                     "sparkwire_redis_replication_lag_bytes", "sparkwire_redis_replication_lag_seconds",
                     "sparkwire_job_redis_replicas_required"):
        assert required in used, f"no alert on {required}"


def test_alert_reset_reasons_are_the_codes() -> None:
    for rule in _rules():
        for matcher in re.findall(r'reason=~?"([^"]*)"', rule["expr"]):
            reasons = set(matcher.split("|"))
            assert reasons <= set(RESET_REASONS), f"{rule['alert']}: {reasons - set(RESET_REASONS)}"


def test_dashboard_uses_metrics_the_code_exports() -> None:
    exposed = _exposed_metric_names()
    dashboards = list((CHART / "dashboards").glob("*.json"))
    assert dashboards
    for path in dashboards:
        dashboard = json.loads(path.read_text())
        exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
        exprs += [variable["definition"] for variable in dashboard["templating"]["list"] if "definition" in variable]
        names = {n for e in exprs for n in re.findall(r"\bsparkwire_[a-z_]+\b", e)}
        assert names and names <= exposed, f"{path.name}: {sorted(names - exposed)} not exported by the code"
