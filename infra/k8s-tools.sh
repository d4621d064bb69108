#!/usr/bin/env bash
# Offline Kubernetes tooling for chart/skaffold verification, from the Go module proxy only:
#   helm (v4), kubectl-validate (native kinds offline, CRDs via --local-crds), kube-score (linting;
#   kube-linter's module host golang.stackrox.io is not reachable from here), promtool (checks and unit-tests
#   the chart's alert rules; Prometheus at the version prometheus-operator pins), plus the CRDs and schemas
#   the rendered objects are checked against, taken from pinned Go modules:
#   - SparkApplication CRD: github.com/kubeflow/spark-operator/v2 (charts/spark-operator-chart/crds/)
#   - ServiceMonitor/PrometheusRule CRDs: github.com/prometheus-operator/prometheus-operator (example/prometheus-operator-crd/)
#   - HTTPRoute CRD (standard channel): sigs.k8s.io/gateway-api (config/crd/standard/)
#   - skaffold v4beta14 JSON schema: github.com/GoogleContainerTools/skaffold/v2 (docs-v2/content/en/schemas/)
# Everything lands in .cache/k8s (bin/, crds/, schemas/); a stamp skips the work while the pins are unchanged.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SPARKWIRE_CACHE:-$ROOT/.cache}"
OUT="$CACHE/k8s"
STAMP="$CACHE/stamps/k8s-tools"

HELM_VERSION=v4.3.1
KUBECTL_VALIDATE_VERSION=v0.0.5-0.20260105161640-a97ccfaca20b
KUBE_SCORE_VERSION=v1.20.0
SPARK_OPERATOR_VERSION=v2.5.0
PROMETHEUS_OPERATOR_VERSION=v0.85.0
GATEWAY_API_VERSION=v1.3.0  # = the one Traefik 3.5.0 (infra/kind/versions.sh) is built against
SKAFFOLD_VERSION=v2.24.0  # the newest the module proxy serves here; = infra/kind/go/skaffold
PROMETHEUS_VERSION=v0.305.0  # Prometheus 3.5 LTS, the github.com/prometheus/prometheus prometheus-operator v0.85.0 requires

# One run at a time per cache (make setup, kind-up and CI's early background build all call this): a second
# waits for the first, then finds its stamp fresh.
mkdir -p "$CACHE/stamps"
exec 9>"$STAMP.lock"
if ! flock -n 9; then
  echo "waiting for another infra/k8s-tools.sh (the same cache) to finish"
  flock 9
fi

PINS="$HELM_VERSION $KUBECTL_VALIDATE_VERSION $KUBE_SCORE_VERSION $SPARK_OPERATOR_VERSION $PROMETHEUS_OPERATOR_VERSION $GATEWAY_API_VERSION $SKAFFOLD_VERSION $PROMETHEUS_VERSION $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$PINS" && -x "$OUT/bin/helm" && -x "$OUT/bin/promtool" ]]; then
  echo "up to date"; exit 0
fi

command -v go >/dev/null || { echo "ERROR: go is required (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$OUT/bin" "$OUT/crds" "$OUT/schemas" "$CACHE/stamps"
# The flags infra/kind/build-binaries.sh builds with (no cgo, -trimpath): the packages both compile at the
# same versions (the standard library's, most of all) are compiled once, from Go's build cache.
export GOBIN="$OUT/bin" GOFLAGS="-buildvcs=false -trimpath" CGO_ENABLED=0

install() {
  echo "--> go install $1"
  go install -v "$1" 2>&1 | awk '{ n++ } n % 25 == 0 { printf "    ... %d packages built\n", n; fflush() }'
}
install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
install "sigs.k8s.io/kubectl-validate@$KUBECTL_VALIDATE_VERSION"
install "github.com/zegl/kube-score/cmd/kube-score@$KUBE_SCORE_VERSION"

# promtool's module has a replace directive, which `go install pkg@version` refuses: build it inside a
# throwaway module carrying the same replace (the only one in prometheus v0.305.0's go.mod).
echo "--> go build promtool (github.com/prometheus/prometheus@$PROMETHEUS_VERSION; a few minutes the first time)"
promtool_mod="$(mktemp -d)"
trap 'rm -rf "$promtool_mod"' EXIT
cat > "$promtool_mod/go.mod" <<'MOD'
module sparkwire.local/promtool

go 1.24

replace github.com/fsnotify/fsnotify v1.8.0 => github.com/fsnotify/fsnotify v1.7.0
MOD
(cd "$promtool_mod" && go get "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" 2>&1 | tail -n 3 \
  && go build -o "$OUT/bin/promtool" github.com/prometheus/prometheus/cmd/promtool)

# module_dir MODULE@VERSION : download a module (sources only) and print where it was unpacked.
module_dir() { (cd "$OUT" && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p'); }

echo "--> CRDs: spark-operator $SPARK_OPERATOR_VERSION, prometheus-operator $PROMETHEUS_OPERATOR_VERSION, gateway-api $GATEWAY_API_VERSION"
rm -rf "$OUT/crds" && mkdir -p "$OUT/crds"
dir="$(module_dir "github.com/kubeflow/spark-operator/v2@$SPARK_OPERATOR_VERSION")"
cp "$dir"/charts/spark-operator-chart/crds/*.yaml "$OUT/crds/"
dir="$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")"
cp "$dir"/example/prometheus-operator-crd/monitoring.coreos.com_{servicemonitors,prometheusrules}.yaml "$OUT/crds/"
dir="$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")"
cp "$dir"/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml "$OUT/crds/"
chmod u+w "$OUT"/crds/*

echo "--> skaffold $SKAFFOLD_VERSION schema v4beta14"
dir="$(module_dir "github.com/GoogleContainerTools/skaffold/v2@$SKAFFOLD_VERSION")"
rm -rf "$OUT/schemas" && mkdir -p "$OUT/schemas"
cp "$dir/docs-v2/content/en/schemas/v4beta14.json" "$OUT/schemas/skaffold-v4beta14.json"
chmod u+w "$OUT"/schemas/*

"$OUT/bin/helm" version --short
"$OUT/bin/promtool" --version | head -n 1
ls "$OUT/crds" "$OUT/schemas"
echo "$PINS" > "$STAMP"
