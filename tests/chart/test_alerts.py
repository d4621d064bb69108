"""The PrometheusRule's alerts, checked by promtool (Prometheus' own PromQL parser and rule evaluator):
valid rules, and unit tests over synthetic series — each alert fires on what it is about, and stays quiet
on what is normal (new clients starting from a snapshot, a gateway slightly behind, a scraped driver)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import CHART, FULLNAME, NAMESPACE, find, render, tool

GW = f'namespace="{NAMESPACE}", job="{FULLNAME}-gateway"'
AGG = f'namespace="{NAMESPACE}", job="{FULLNAME}-aggregator-metrics"'


def _groups() -> list[dict[str, Any]]:
    rule = find(render([CHART / "ci" / "observability-values.yaml"]), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool("promtool")), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          check=False)


def test_rules_are_valid(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _groups()}))
    result = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def _series(name: str, selector: str, values: str, **labels: str) -> dict[str, str]:
    extra = "".join(f', {k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{selector}{extra}}}", "values": values}


def _alert(at: str, name: str, *fired: dict[str, str]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in fired]}


def test_alerts_fire_on_what_they_are_about(tmp_path: Path) -> None:
    # Annotations are prose; the unit tests are about when alerts fire and with which labels.
    groups = _groups()
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    common = {"namespace": NAMESPACE, "stream": "metrics"}
    series = [
        # One client reports a duplicate at minute 3; gaps stay at zero.
        _series("sparkwire_client_reported_duplicates_total", GW, "0 0 0 1 1 1 1 1 1 1", stream="metrics",
                pod="gw-1"),
        _series("sparkwire_client_reported_gaps_total", GW, "0x30", stream="metrics", pod="gw-1"),
        _series("sparkwire_gateway_gaps_detected_total", GW, "0x30", stream="metrics", pod="gw-1"),
        # Snapshot resets: new clients (no_position) are normal however many; cursor_too_old at 1/s is a spike.
        _series("sparkwire_gateway_resets_total", GW, "0+600x30", stream="metrics", reason="no_position",
                pod="gw-1"),
        _series("sparkwire_gateway_resets_total", GW, "0+60x30", stream="metrics", reason="cursor_too_old",
                pod="gw-1"),
        # Redis errors on gw-2 for a while.
        _series("sparkwire_gateway_redis_errors_total", GW, "0+10x30", operation="xread", pod="gw-2"),
        # The log is at 5000; gw-1 follows, gw-2 is stuck at 1000.
        _series("sparkwire_sink_last_seq", AGG, "5000x30", pod="driver"),
        _series("sparkwire_gateway_head_seq", GW, "4995x30", stream="metrics", pod="gw-1"),
        _series("sparkwire_gateway_head_seq", GW, "1000x30", stream="metrics", pod="gw-2"),
        # The aggregator falls 200k Kafka records behind from minute 2 on.
        _series("sparkwire_job_kafka_offsets_behind", AGG, "0 0 200000x28", query="sparkwire-aggregate",
                pod="driver"),
        # A failover loses the log's tail at minute 6 (the job counts it once).
        _series("sparkwire_job_tail_losses_total", AGG, "0x6 1x24", pod="driver"),
        # Gateways are up throughout; the driver disappears after minute 5.
        _series("up", GW, "1x30", pod="gw-1"),
        _series("up", AGG, "1x5 0x25", pod="driver"),
    ]
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                _alert("2m", "SparkwireClientsReportDuplicates"),
                _alert("5m", "SparkwireClientsReportDuplicates", {**common, "severity": "critical"}),
                _alert("5m", "SparkwireClientsReportGaps"),
                _alert("5m", "SparkwireGatewayGapDetected"),
                _alert("9m", "SparkwireSnapshotResetsSpiking"),  # pending: `for: 10m`
                _alert("20m", "SparkwireSnapshotResetsSpiking",
                       {**common, "reason": "cursor_too_old", "severity": "warning"}),
                _alert("20m", "SparkwireReplayLogEpochChanged"),
                _alert("20m", "SparkwireGatewayRedisErrors", {"namespace": NAMESPACE, "pod": "gw-2",
                                                              "operation": "xread", "severity": "warning"}),
                _alert("20m", "SparkwireGatewayLagging", {**common, "pod": "gw-2", "severity": "warning"}),
                _alert("20m", "SparkwireGatewaysDown"),
                _alert("4m", "SparkwireAggregatorDown"),
                _alert("20m", "SparkwireAggregatorDown", {"severity": "critical"}),
                _alert("20m", "SparkwireSinkSuppressedDuplicates"),
                _alert("5m", "SparkwireReplayLogTailLost"),
                _alert("7m", "SparkwireReplayLogTailLost", {"namespace": NAMESPACE, "severity": "critical"}),
                _alert("8m", "SparkwireKafkaConsumerLag"),  # pending: `for: 10m`
                _alert("14m", "SparkwireKafkaConsumerLag", {"namespace": NAMESPACE, "severity": "warning"}),
            ],
        }],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def _scenario(series: list[dict[str, str]], *alerts: dict[str, Any], interval: str = "1m") -> dict[str, Any]:
    return {"interval": interval, "input_series": series, "alert_rule_test": list(alerts)}


def test_redis_replication_alerts_fire_on_what_they_are_about(tmp_path: Path) -> None:
    groups = [g for g in _groups() if g["name"] == "sparkwire.redis"]
    for rule in groups[0]["rules"]:
        rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    ns = {"namespace": NAMESPACE}
    mib = 1024 * 1024

    def redis(connected: str, lag_bytes: str, lag_seconds: str, changes: str, required: str,
              pods: tuple[str, ...] = ("gw-1", "gw-2")) -> list[dict[str, str]]:
        series = [_series("sparkwire_job_redis_replicas_required", AGG, f"{required}x60", pod="driver")]
        for pod in pods:
            series += [_series("sparkwire_redis_replicas_connected", GW, connected, pod=pod),
                       _series("sparkwire_redis_replication_lag_bytes", GW, lag_bytes, pod=pod),
                       _series("sparkwire_redis_replication_lag_seconds", GW, lag_seconds, pod=pod),
                       _series("sparkwire_redis_primary_changes_total", GW, changes, pod=pod)]
        return series

    quiet = ("SparkwireRedisFailover", "SparkwireRedisReplicationLag", "SparkwireRedisNoReplica")
    scenarios = [
        # Healthy: 2 replicas, ~0.5 MB behind (a second of writes), one 20 MiB spike, one 4 s ack gap.
        _scenario(redis("2x30", f"500000x10 {20 * mib} 500000x19", "0 1 0 1 4 1 0x24", "0x30", "1"),
                  *(_alert(at, name) for at in ("4m", "6m", "8m", "20m") for name in quiet)),
        # A lone Redis the jobs do not WAIT for (replicas 0): nothing to say.
        _scenario(redis("0x30", "0x30", "0x30", "0x30", "0"), *(_alert("10m", name) for name in quiet)),
        # A failover at minute 5, seen by both gateways: one alert, for 10 minutes; the promoted replica
        # keeps one replica, which is what the jobs wait for.
        _scenario(redis("2x4 1x10 2x15", "0x30", "0x30", "0x5 1x25", "1"),
                  _alert("4m", "SparkwireRedisFailover"),
                  _alert("6m", "SparkwireRedisFailover", {**ns, "severity": "info"}),
                  _alert("14m", "SparkwireRedisFailover", {**ns, "severity": "info"}),
                  _alert("17m", "SparkwireRedisFailover"),
                  _alert("10m", "SparkwireRedisNoReplica")),
        # A replica 20 MiB behind from minute 2 on: pending for 2 minutes, then a warning.
        _scenario(redis("2x30", f"0 0 {20 * mib}x28", "0x30", "0x30", "1"),
                  _alert("3m", "SparkwireRedisReplicationLag"),
                  _alert("5m", "SparkwireRedisReplicationLag", {**ns, "severity": "warning"})),
        # Scraped every 30 s, a replica that keeps stalling (5-6 s without an ack in every other scrape) from
        # minute 2 to 10: it fires although the lag keeps coming back to 1 s; not once the stalls stop.
        _scenario(redis("2x60", "0x60", "0x3 " + "5 1 6 1 " * 4 + "0x40", "0x60", "1"),
                  _alert("3m", "SparkwireRedisReplicationLag"),
                  _alert("5m", "SparkwireRedisReplicationLag", {**ns, "severity": "warning"}),
                  _alert("25m", "SparkwireRedisReplicationLag"), interval="30s"),
        # The jobs WAIT for 1 replica and none is online from minute 3: critical after a minute.
        _scenario(redis("2 2 2 0x27", "0x30", "0x30", "0x30", "1"),
                  _alert("3m", "SparkwireRedisNoReplica"),
                  _alert("5m", "SparkwireRedisNoReplica", {**ns, "severity": "critical"})),
        # They WAIT for 2 and one is left: they cannot commit either.
        _scenario(redis("2 2 2 1x27", "0x30", "0x30", "0x30", "2"),
                  _alert("5m", "SparkwireRedisNoReplica", {**ns, "severity": "critical"})),
    ]
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": scenarios}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("alert", ["SparkwireClientsReportDuplicates", "SparkwireClientsReportGaps",
                                   "SparkwireGatewayGapDetected", "SparkwireReplayLogEpochChanged",
                                   "SparkwireReplayLogTailLost"])
def test_exactly_once_alerts_page_at_once(alert: str) -> None:
    rules = {r["alert"]: r for g in _groups() for r in g["rules"]}
    assert rules[alert]["labels"]["severity"] == "critical"
    assert "for" not in rules[alert], "one duplicate or gap is already a broken guarantee"
