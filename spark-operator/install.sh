#!/usr/bin/env bash
# Installs (or upgrades) the Kubeflow Spark operator that runs sparkwire's aggregator SparkApplication:
# chart spark-operator 2.5.0 from https://kubeflow.github.io/spark-operator with ./values.yaml, watching
# the sparkwire namespace (created first, from ./namespace.yaml). Idempotent: run it again to upgrade.
#
#   bash spark-operator/install.sh              # kubectl context = the target cluster
#   bash spark-operator/install.sh --template   # print the rendered manifests instead (no cluster needed)
#   bash spark-operator/install.sh -- ARGS...   # extra helm arguments, e.g. --set image.registry=... or
#                                               # --kube-context (make kind-up passes the images it built)
#
# Environment:
#   SPARKWIRE_NAMESPACE       namespace of the sparkwire release (default sparkwire)
#   SPARK_OPERATOR_NAMESPACE  namespace of the operator (default spark-operator)
#   SPARK_OPERATOR_RELEASE    helm release name (default spark-operator)
#   SPARK_OPERATOR_CHART      a local copy of the chart (directory) instead of the chart repository,
#                             e.g. charts/spark-operator-chart of the Go module
#                             github.com/kubeflow/spark-operator/v2@v2.5.0 (offline; the tests use it)
#   HELM, KUBECTL             the binaries to use (default: helm and kubectl on PATH)
# Needs helm >= 3.8 and, to install, kubectl.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CHART_REPO=https://kubeflow.github.io/spark-operator
CHART_NAME=spark-operator
CHART_VERSION=2.5.0

JOB_NAMESPACE="${SPARKWIRE_NAMESPACE:-sparkwire}"
OPERATOR_NAMESPACE="${SPARK_OPERATOR_NAMESPACE:-spark-operator}"
RELEASE="${SPARK_OPERATOR_RELEASE:-spark-operator}"
LOCAL_CHART="${SPARK_OPERATOR_CHART:-}"
HELM="${HELM:-helm}"
KUBECTL="${KUBECTL:-kubectl}"

mode=install
extra=()
while (($#)); do
  case "$1" in
    --template) mode=template; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [--template] [-- HELM_ARGS...]" >&2; exit 2 ;;
  esac
done

if [[ -n "$LOCAL_CHART" ]]; then
  found="$(sed -n 's/^version: *//p' "$LOCAL_CHART/Chart.yaml")"
  if [[ "$found" != "$CHART_VERSION" ]]; then
    echo "ERROR: $LOCAL_CHART is chart version '$found', this install is pinned to $CHART_VERSION" >&2
    exit 1
  fi
  chart=("$LOCAL_CHART")
else
  chart=("$CHART_NAME" --repo "$CHART_REPO" --version "$CHART_VERSION")
fi

values=(
  --namespace "$OPERATOR_NAMESPACE"
  --values "$HERE/values.yaml"
  # One job namespace, the release's: overrides the list in values.yaml (same default).
  --set "spark.jobNamespaces={$JOB_NAMESPACE}"
)

if [[ "$mode" == template ]]; then
  exec "$HELM" template "$RELEASE" "${chart[@]}" "${values[@]}" "${extra[@]}"
fi

command -v "$KUBECTL" >/dev/null || { echo "ERROR: kubectl is required (KUBECTL=$KUBECTL)" >&2; exit 1; }
echo "--> namespace $JOB_NAMESPACE (the operator's job namespace)"
sed "s/^  name: sparkwire$/  name: $JOB_NAMESPACE/" "$HERE/namespace.yaml" | "$KUBECTL" apply -f -

echo "--> $CHART_NAME $CHART_VERSION as release $RELEASE in $OPERATOR_NAMESPACE, watching $JOB_NAMESPACE"
# helm installs the chart's CRDs on first install only; an upgrade to another chart version must apply the
# new CRDs first (see README.md).
"$HELM" upgrade --install "$RELEASE" "${chart[@]}" "${values[@]}" "${extra[@]}" \
  --create-namespace --wait --timeout 5m

"$KUBECTL" -n "$OPERATOR_NAMESPACE" rollout status deployment --selector "app.kubernetes.io/instance=$RELEASE" \
  --timeout 180s
