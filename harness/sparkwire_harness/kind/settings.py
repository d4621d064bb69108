"""Where the kind suite finds things: the cluster's kubeconfig context, the release's namespace and name, the
ingress, the checkout's chart and values files and `make kind-up`'s release.env; the chart's resource names
and label selectors derived from the release name. Read once from the environment (tests/e2e/kind/README.md
lists the variables)."""

from __future__ import annotations

import os
from pathlib import Path

from sparkwire.producer.publisher import DELIVERY_TIMEOUT_S

# harness/sparkwire_harness/kind/settings.py -> the checkout (the harness is installed editable from it).
ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "sparkwire"
KIND_VALUES = CHART / "ci" / "kind-values.yaml"
E2E_VALUES = ROOT / "tests" / "e2e" / "kind" / "e2e-values.yaml"
RELEASE_ENV = Path(os.environ.get("SPARKWIRE_CACHE", str(ROOT / ".cache"))) / "kind" / "release.env"

CONTEXT = os.environ.get("SPARKWIRE_KIND_CONTEXT", "kind-sparkwire")
NAMESPACE = os.environ.get("SPARKWIRE_NAMESPACE", "sparkwire")
RELEASE = os.environ.get("SPARKWIRE_RELEASE", "sparkwire")
HTTP = os.environ.get("SPARKWIRE_KIND_HTTP", "http://127.0.0.1:18080").rstrip("/")
CLIENTS = int(os.environ.get("SPARKWIRE_KIND_CLIENTS", "50"))
REQUIRED = os.environ.get("SPARKWIRE_KIND_REQUIRED", "") == "1"
# Opt-in: a cluster left running (a developer's, this machine's after `make kind-up`) must not turn
# `make test` into a 40-minute run that uninstalls and reinstalls the release.
WANTED = REQUIRED or os.environ.get("SPARKWIRE_KIND", "") == "1"


def chart_fullname(release: str) -> str:
    """The chart's ``sparkwire.fullname``: the release name when it contains "sparkwire", else
    ``<release>-sparkwire``."""
    return release if "sparkwire" in release else f"{release}-sparkwire"


def control_plane(context: str) -> str:
    """kind names its nodes ``<cluster>-<role>[N]``; its kubeconfig context is ``kind-<cluster>``."""
    return context.removeprefix("kind-") + "-control-plane"


FULLNAME = chart_fullname(RELEASE)
CONTROL_PLANE = control_plane(CONTEXT)
KAFKA_CLIENT_LABEL = {"sparkwire.io/kafka-client": "true"}  # the chart's networkPolicy.kafkaClientLabel
RELEASE_SELECTOR = f"app.kubernetes.io/instance={RELEASE}"  # every pod of the chart, Spark's included
AGGREGATOR_APP = f"{FULLNAME}-aggregator"  # the SparkApplication
DRIVER_SELECTOR = f"spark-role=driver,sparkoperator.k8s.io/app-name={AGGREGATOR_APP}"
EXECUTOR_SELECTOR = f"spark-role=executor,sparkoperator.k8s.io/app-name={AGGREGATOR_APP}"
GATEWAY_SELECTOR = f"{RELEASE_SELECTOR},app.kubernetes.io/component=gateway"
REDIS_SELECTOR = f"{RELEASE_SELECTOR},app.kubernetes.io/component=redis"
KAFKA_SELECTOR = f"{RELEASE_SELECTOR},app.kubernetes.io/component=kafka"
GATEWAY_DEPLOYMENT = f"{FULLNAME}-gateway"
REDIS_POD = f"{FULLNAME}-redis-0"
REDIS_CLAIM = f"data-{REDIS_POD}"  # the StatefulSet's volumeClaimTemplate `data`

PRODUCE_SECONDS = 60
RESULTS_TIMEOUT = 300  # a lost driver: the operator's retry interval, a new driver pod, Spark's start
# After its last record a producer Job may flush for as long as librdkafka retries a record (a broker being
# rescheduled), then its pod stops and the Job reports.
PRODUCER_GRACE_S = DELIVERY_TIMEOUT_S + 60
