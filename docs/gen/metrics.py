"""Writes reference/metrics.md: every Prometheus metric sparkwire exports, read from the metric objects its
modules register (name, type, labels, help text), and every alert of the chart's PrometheusRule template
(charts/sparkwire/templates/observability/prometheusrule.yaml), each linked to its runbook in operations.md.

Run by mkdocs-gen-files at build time (mkdocs.yml), so the page lists what the code and the chart define."""

from __future__ import annotations

import re
from pathlib import Path

import mkdocs_gen_files
import prometheus_client

# Imported for what they register in prometheus_client's default registry (the metrics job's own counters
# are in closing_sink).
import sparkwire.aggregator.closing_sink
import sparkwire.gateway.metrics
import sparkwire.spark.metrics  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "sparkwire" / "templates" / "observability" / "prometheusrule.yaml"
EXPORTERS = {"sparkwire_gateway_": "gateways", "sparkwire_client_": "gateways (from clients' acks)",
             "sparkwire_redis_": "gateways", "sparkwire_sink_": "Spark jobs", "sparkwire_aggregator_": "Spark jobs",
             "sparkwire_query_": "Spark jobs", "sparkwire_job_": "Spark jobs"}


def _cell(text: str) -> str:
    return _escape(" ".join(text.split()).replace("|", "\\|"))

def _escape(text: str) -> str:
    """``<`` and ``>`` outside code spans as entities, so that ``<master>`` shows rather than vanish as HTML."""
    parts = text.split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;") for i, part in enumerate(parts))



def metrics_table() -> str:
    rows = ["| metric | type | labels | exported by | what it measures |", "|---|---|---|---|---|"]
    collectors = [c for c in prometheus_client.REGISTRY._collector_to_names if hasattr(c, "_name")]
    for metric in sorted(collectors, key=lambda c: c._name):
        name = metric._name + ("_total" if metric._type == "counter" else "")
        labels = ", ".join(f"`{label}`" for label in metric._labelnames)
        exporter = next((who for prefix, who in EXPORTERS.items() if metric._name.startswith(prefix)), "")
        rows.append(f"| `{name}` | {metric._type} | {labels} | {exporter} | {_cell(metric._documentation)} |")
    return "\n".join(rows)


def _template_text(text: str) -> str:
    """An annotation as Prometheus shows it, with the template's label references written plainly."""
    text = re.sub(r'\{\{ "\{\{ \$labels\.(\w+) \}\}" \}\}', r"{\1}", text)
    text = re.sub(r'\{\{ "\{\{ \$value[^}]*\}\}" \}\}', "{value}", text)
    text = re.sub(r"\{\{ \$?\.Release\.Namespace \}\}", "{namespace}", text)
    return re.sub(r"\{\{ \$?\.?([\w.]+) \}\}", r"{\1}", text)  # the chart's own: {{ $job.name }} -> {job.name}


def alerts_table() -> str:
    rows = ["| alert | severity | summary | runbook |", "|---|---|---|---|"]
    alert = severity = summary = None
    for line in RULES.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("- alert:"):
            alert, severity, summary = stripped.split(":", 1)[1].strip(), None, None
        elif stripped.startswith("severity:") and alert:
            severity = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("summary:") and alert:
            summary = _template_text(stripped.split(":", 1)[1].strip())
            rows.append(f"| `{alert}` | {severity} | {_cell(summary)} | "
                        f"[runbook](../operations.md#{alert.lower()}) |")
            alert = None
    return "\n".join(rows)


PAGE = f"""# Metrics and alerts

Generated when the site is built: the metrics from the metric objects sparkwire's modules define, the alerts
from the chart's PrometheusRule template (`charts/sparkwire/templates/observability/prometheusrule.yaml`).

**Where they are served.** A gateway serves `/metrics` on its own port (not routed by the chart's Ingress).
A Spark job serves them on `--metrics-port` (the chart: `aggregator.config.metricsPort`, 9108; the command's
default 0 is off). The chart's ServiceMonitors (`observability.serviceMonitor.enabled`) scrape both, and its
PrometheusRule (`observability.prometheusRule.enabled`) holds the alerts below; both need the
prometheus-operator's CRDs. A Grafana dashboard comes as a ConfigMap for Grafana's sidecar.

Besides these, every process exports `prometheus_client`'s own process and Python metrics, and the Spark
jobs log one JSON object per line (each micro-batch's progress: batch id, rows in, duration, watermark; each
commit).

## Alerts

What each means, how to confirm it and what to do: the [runbooks](../operations.md#alerts-a-runbook-for-each).
The thresholds are chart values under `observability.prometheusRule` ([Helm values](helm-values.md)).

{alerts_table()}

## Metrics

{metrics_table()}
"""

with mkdocs_gen_files.open("reference/metrics.md", "w") as out:
    out.write(PAGE)
