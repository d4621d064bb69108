"""The users' jobs' alert: rows Spark's watermark dropped as late (``SparkwireQueryRowsDroppedByWatermark``),
checked by promtool over synthetic series — it fires on a lagging partition's burst of drops, per query, and
stays quiet on a trickle of stragglers and on the metrics job (whose windows are its own)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from .conftest import CHART, FULLNAME, NAMESPACE, find, render, tool

ALERT = "SparkwireQueryRowsDroppedByWatermark"
ORDERS = f'namespace="{NAMESPACE}", job="{FULLNAME}-job-orders-metrics"'
FRAUD = f'namespace="{NAMESPACE}", job="{FULLNAME}-job-fraud-metrics"'
AGG = f'namespace="{NAMESPACE}", job="{FULLNAME}-aggregator-metrics"'


def _groups(*values: Path) -> list[dict[str, Any]]:
    rule = find(render([CHART / "ci" / "observability-values.yaml", *values]), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def test_the_alert_is_there_only_with_jobs() -> None:
    assert "sparkwire.jobs" not in [g["name"] for g in _groups()]
    jobs = [g for g in _groups(CHART / "ci" / "jobs-values.yaml") if g["name"] == "sparkwire.jobs"]
    rules = {r["alert"]: r for r in jobs[0]["rules"]}
    assert ALERT in rules
    assert "maxOffsetsPerTrigger" in rules[ALERT]["annotations"]["description"]


def _series(name: str, selector: str, values: str, query: str) -> dict[str, str]:
    return {"series": f'{name}{{{selector}, query="{query}", pod="driver"}}', "values": values}


def test_the_alert_fires_per_query_on_a_burst_of_late_rows(tmp_path: Path) -> None:
    groups = [g for g in _groups(CHART / "ci" / "jobs-values.yaml") if g["name"] == "sparkwire.jobs"]
    groups[0]["rules"] = [rule for rule in groups[0]["rules"] if rule["alert"] == ALERT]
    for rule in groups[0]["rules"]:
        rule.pop("annotations", None)  # prose; the test is about when the alert fires and with which labels
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    dropped, rows = "sparkwire_query_rows_dropped_by_watermark_total", "sparkwire_query_input_rows_total"
    series = [
        # orders: 600 rows a minute; a partition's leader fails over at minute 10 and 1,500 of its rows are
        # dropped as late in one batch.
        _series(rows, ORDERS, "0+600x40", "orders"),
        _series(dropped, ORDERS, "0x10 1500x30", "orders"),
        # fraud: 6,000 rows a minute and a straggler now and then (1 row in 10 minutes: under 0.1 %).
        _series(rows, FRAUD, "0+6000x40", "fraud-alerts"),
        _series(dropped, FRAUD, "0x5 1x10 2x25", "fraud-alerts"),
        # The metrics job drops late events too; its windows are its own, and this alert is not about it.
        _series(rows, AGG, "0+600x40", "sparkwire-aggregate"),
        _series(dropped, AGG, "0+100x40", "sparkwire-aggregate"),
    ]
    fired = {"namespace": NAMESPACE, "job": f"{FULLNAME}-job-orders-metrics", "query": "orders",
             "severity": "warning"}
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [
            {"eval_time": "9m", "alertname": ALERT, "exp_alerts": []},
            {"eval_time": "12m", "alertname": ALERT, "exp_alerts": [{"exp_labels": fired}]},
            # Ten minutes after the burst, the rate window no longer holds it.
            {"eval_time": "25m", "alertname": ALERT, "exp_alerts": []},
        ],
    }]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run([str(tool("promtool")), "test", "rules", "tests.yaml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
