"""A team's own jobs watched as the built-in aggregator is (issue 40): per-job alerts (driver down, Kafka lag,
slow commits) checked by promtool over synthetic series; a runbook_url on every alert, anchored at its name in
docs/operations.md; the dashboard's job and stream variables; the `helm test` pod that asks the gateway for
/readyz and reads a stream with a token it mints; Chart.yaml's Artifact Hub metadata."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import CHART, CI_VALUES, FULLNAME, NAMESPACE, Obj, find, kinds, render, tool

JOBS = CHART / "ci" / "jobs-values.yaml"
OBSERVABILITY = CHART / "ci" / "observability-values.yaml"
RUNBOOKS = "https://github.com/sparkwire/sparkwire/blob/main/docs/operations.md"
ORDERS_JOB = f"{FULLNAME}-job-orders-metrics"
FRAUD_JOB = f"{FULLNAME}-job-fraud-metrics"


def _rules(*values: Path, sets: dict[str, Any] | None = None) -> list[Obj]:
    rule = find(render([OBSERVABILITY, *values], sets), "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


@pytest.mark.parametrize("values", [pytest.param([], id="defaults"), pytest.param([JOBS], id="jobs")])
def test_every_alert_links_its_runbook_at_its_lowercased_name(values: list[Path]) -> None:
    rules = _rules(*values)
    assert len(rules) >= 17
    for rule in rules:
        assert rule["annotations"]["runbook_url"] == f"{RUNBOOKS}#{rule['alert'].lower()}", rule["alert"]


def test_the_runbook_page_is_a_value() -> None:
    rules = _rules(sets={"observability.prometheusRule.runbookBaseUrl": "https://wiki.example/sparkwire"})
    assert {r["annotations"]["runbook_url"].split("#")[0] for r in rules} == {"https://wiki.example/sparkwire"}


def test_each_job_gets_the_aggregators_alerts() -> None:
    rules = _rules(JOBS)
    down = [r for r in rules if r["alert"] == "SparkwireJobDown"]
    assert [(r["labels"]["sparkwire_job"], r["labels"]["stream"]) for r in down] == [
        ("orders", "orders"), ("fraud", "fraud-alerts")]
    assert f'job="{ORDERS_JOB}"' in down[0]["expr"] and f'job="{FRAUD_JOB}"' in down[1]["expr"]
    names = {r["alert"] for r in rules}
    assert {"SparkwireJobKafkaConsumerLag", "SparkwireJobCommitSlow"} <= names
    assert not {"SparkwireJobDown", "SparkwireJobKafkaConsumerLag"} & {r["alert"] for r in _rules()}, "no jobs"
    # Without the built-in aggregator, the jobs are still watched.
    alone = {r["alert"] for r in _rules(JOBS, sets={"aggregator.enabled": False})}
    assert "SparkwireAggregatorDown" not in alone and "SparkwireJobDown" in alone


def _series(name: str, job: str, values: str, **labels: str) -> dict[str, str]:
    extra = "".join(f', {k}="{v}"' for k, v in labels.items())
    return {"series": f'{name}{{namespace="{NAMESPACE}", job="{job}", pod="driver"{extra}}}', "values": values}


def test_the_job_alerts_fire_per_job(tmp_path: Path) -> None:
    rule = find(render([OBSERVABILITY, JOBS]), "PrometheusRule")
    groups = [g for g in rule["spec"]["groups"] if g["name"] == "sparkwire.jobs"]
    for r in groups[0]["rules"]:
        r.pop("annotations", None)  # prose; the test is about when the alerts fire and with which labels
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    bucket = "sparkwire_sink_commit_seconds_bucket"
    series = [
        # orders' driver is up throughout; fraud's disappears after minute 5.
        _series("up", ORDERS_JOB, "1x40"),
        _series("up", FRAUD_JOB, "1x5 0x35"),
        # fraud falls 500k records behind from minute 2 on; orders keeps up.
        _series("sparkwire_job_kafka_offsets_behind", FRAUD_JOB, "0 0 500000x38", query="fraud"),
        _series("sparkwire_job_kafka_offsets_behind", ORDERS_JOB, "10x40", query="orders"),
        # orders' commits take ~4 s from minute 1 on (every commit lands in the 5 s bucket), fraud's ~10 ms.
        _series(bucket, ORDERS_JOB, "0+10x40", le="2.5"),
        _series(bucket, ORDERS_JOB, "0+60x40", le="5.0"),
        _series(bucket, ORDERS_JOB, "0+60x40", le="+Inf"),
        _series(bucket, FRAUD_JOB, "0+60x40", le="0.01"),
        _series(bucket, FRAUD_JOB, "0+60x40", le="+Inf"),
    ]

    def alert(at: str, name: str, *fired: dict[str, str]) -> dict[str, Any]:
        return {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in fired]}

    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [
            alert("4m", "SparkwireJobDown"),
            alert("20m", "SparkwireJobDown", {"severity": "critical", "sparkwire_job": "fraud",
                                              "stream": "fraud-alerts"}),
            alert("8m", "SparkwireJobKafkaConsumerLag"),  # pending: `for: 10m`
            alert("20m", "SparkwireJobKafkaConsumerLag", {"namespace": NAMESPACE, "job": FRAUD_JOB,
                                                          "query": "fraud", "severity": "warning"}),
            alert("20m", "SparkwireJobCommitSlow", {"namespace": NAMESPACE, "job": ORDERS_JOB,
                                                    "severity": "warning"}),
        ],
    }]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run([str(tool("promtool")), "test", "rules", "tests.yaml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_filters_by_job_and_stream() -> None:
    import json

    dashboard = json.loads((CHART / "dashboards" / "sparkwire.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"namespace", "job", "stream"} <= set(variables)
    assert "sparkwire_sink_last_seq" in variables["job"]["definition"]
    assert "sparkwire_gateway_head_seq" in variables["stream"]["definition"]
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert all('stream=~"$stream"' in e for e in exprs if "sparkwire_gateway_connections" in e)
    assert all('job=~"$job"' in e for e in exprs if "sparkwire_sink_" in e or "sparkwire_aggregator_" in e)


def _test_pod(objects: list[Obj]) -> Obj:
    return find(objects, "Pod", f"{FULLNAME}-test-gateway-ready")


@pytest.mark.parametrize("values", [pytest.param(None, id="defaults")] + [pytest.param(p, id=p.stem)
                                                                          for p in CI_VALUES])
def test_helm_test_asks_the_gateway_service_for_readiness(values: Path | None) -> None:
    objects = render([values] if values else [])
    pod = _test_pod(objects)
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    container = pod["spec"]["containers"][0]
    gateway = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == gateway["image"], "the gateway's own image: nothing more to pull"
    service = find(objects, "Service", f"{FULLNAME}-gateway")
    base = f"http://{FULLNAME}-gateway.{NAMESPACE}.svc:{service['spec']['ports'][0]['port']}"
    script, *arguments = container["args"]
    assert arguments[:2] == [base, "metrics"] and "/readyz" in script and "/snapshot?stream=" in script
    # With authentication on, it mints a token from the gateways' own secret (and checks 401 without one).
    secret = {e["name"]: e for e in container.get("env", [])}.get("SPARKWIRE_AUTH_SECRET")
    gateway_env = {e["name"]: e for e in gateway["env"]}
    if "SPARKWIRE_AUTH_SECRET" in gateway_env:
        assert secret is not None and secret["valueFrom"] == gateway_env["SPARKWIRE_AUTH_SECRET"]["valueFrom"]
        assert "issue_token" in script
    else:
        assert secret is None
    assert pod["spec"]["restartPolicy"] == "Never"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_helm_test_passes_the_network_policies() -> None:
    objects = render(sets={"networkPolicy.gatewayFrom": [{"namespaceSelector": {"matchLabels": {"ingress": "yes"}}}]})
    gateway_policy = find(objects, "NetworkPolicy", f"{FULLNAME}-gateway")
    sources = gateway_policy["spec"]["ingress"][0]["from"]
    selector = sources[-1]["podSelector"]["matchLabels"]
    assert selector.items() <= _test_pod(objects)["metadata"]["labels"].items()
    own = find(objects, "NetworkPolicy", f"{FULLNAME}-test-gateway-ready")
    assert own["spec"]["podSelector"]["matchLabels"].items() <= _test_pod(objects)["metadata"]["labels"].items()
    assert "Pod" not in kinds(render(sets={"tests.enabled": False}))


def test_the_chart_describes_itself_for_artifact_hub() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["home"].startswith("https://") and chart["sources"] and chart["maintainers"]
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    links = yaml.safe_load(annotations["artifacthub.io/links"])
    assert any(link["url"].endswith("docs/operations.md") for link in links)
    assert yaml.safe_load(annotations["artifacthub.io/changes"])
