#!/usr/bin/env bash
# A kind cluster running sparkwire as the kind e2e tests expect it (idempotent: run again after a change).
#
#   bash tests/e2e/kind/up.sh       # then: .venv/bin/pytest tests/e2e/kind -rs
#   bash tests/e2e/kind/down.sh     # delete the cluster
#
# Steps: kind (go install sigs.k8s.io/kind@v0.30.0 when missing) -> cluster `sparkwire` (kind-config.yaml)
# -> ingress-nginx (its kind manifest) -> the Spark operator (spark-operator/install.sh) -> both images built
# and loaded into the nodes -> the chart with ci/kind-values.yaml + e2e-values.yaml (ingress on).
#
# Needs: a Docker engine, go (only to install kind), helm, kubectl, and network access to Docker Hub, the
# Kubeflow chart repository and GitHub (ingress-nginx's manifest). None of that is reachable from the
# project's sandbox, which is why the kind tests skip there; a developer machine or CI runner with Docker
# has all of it.
# SPARKWIRE_USE_SKAFFOLD=1 builds and deploys with `skaffold run -p kind,e2e` instead of docker + helm
# (skaffold >= 2.19.0, the first release that reads apiVersion skaffold/v4beta14).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
CLUSTER=sparkwire
CONTEXT="kind-$CLUSTER"
NAMESPACE=${SPARKWIRE_NAMESPACE:-sparkwire}
RELEASE=sparkwire
KIND_VERSION=v0.30.0
INGRESS_NGINX_VERSION=${INGRESS_NGINX_VERSION:-controller-v1.13.3}
INGRESS_NGINX_MANIFEST="https://raw.githubusercontent.com/kubernetes/ingress-nginx/$INGRESS_NGINX_VERSION/deploy/static/provider/kind/deploy.yaml"
BIN="$ROOT/.cache/kind/bin"
export PATH="$BIN:$ROOT/.cache/k8s/bin:$PATH"  # kind from here, helm from infra/k8s-tools.sh when present

header() { printf '\n== %s\n' "$*"; }
need() { command -v "$1" >/dev/null || { echo "ERROR: $1 is required: $2" >&2; exit 1; }; }

need docker "a Docker engine (https://docs.docker.com/engine/install/)"
docker info >/dev/null 2>&1 || { echo "ERROR: docker is installed but no Docker engine answers (docker info)" >&2; exit 1; }
need helm "https://helm.sh/docs/intro/install/ (or: bash infra/k8s-tools.sh)"
need kubectl "https://kubernetes.io/docs/tasks/tools/"
if ! command -v kind >/dev/null; then
  need go "to install kind (https://go.dev/dl/)"
  header "kind $KIND_VERSION -> $BIN"
  mkdir -p "$BIN"
  GOBIN="$BIN" go install "sigs.k8s.io/kind@$KIND_VERSION"
fi
kubectl_() { kubectl --context "$CONTEXT" "$@"; }

header "cluster $CLUSTER"
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  echo "exists"
else
  kind create cluster --config "$HERE/kind-config.yaml" --wait 120s
fi
kubectl config use-context "$CONTEXT" >/dev/null

if [[ "${SPARKWIRE_KIND_INGRESS:-1}" == 1 ]]; then
  header "ingress-nginx $INGRESS_NGINX_VERSION"
  kubectl_ apply -f "$INGRESS_NGINX_MANIFEST"
  kubectl_ -n ingress-nginx rollout status deployment/ingress-nginx-controller --timeout 180s
fi

header "Spark operator (spark-operator/install.sh)"
SPARKWIRE_NAMESPACE="$NAMESPACE" bash "$ROOT/spark-operator/install.sh"  # current context: set above

if [[ "${SPARKWIRE_USE_SKAFFOLD:-0}" == 1 ]]; then
  header "skaffold run -p kind,e2e"
  need skaffold "https://skaffold.dev/docs/install/ (>= 2.19.0)"
  (cd "$ROOT" && skaffold run -p kind,e2e --kube-context "$CONTEXT")
else
  # Tag = the image's own ID: a rebuild with changes gets a new tag (so helm rolls the pods), an unchanged
  # one keeps it.
  images=()
  for component in gateway aggregator; do
    header "image sparkwire-$component"
    docker build -f "$ROOT/images/$component/Dockerfile" -t "sparkwire-$component:build" "$ROOT"
    id="$(docker image inspect --format '{{.Id}}' "sparkwire-$component:build")"
    tag="${id#sha256:}"
    tag="${tag:0:12}"
    docker tag "sparkwire-$component:build" "sparkwire-$component:$tag"
    images+=("sparkwire-$component:$tag")
    declare "TAG_${component}=$tag"
  done
  header "kind load ${images[*]}"
  kind load docker-image --name "$CLUSTER" "${images[@]}"

  header "helm upgrade --install $RELEASE (namespace $NAMESPACE)"
  helm --kube-context "$CONTEXT" upgrade --install "$RELEASE" "$ROOT/charts/sparkwire" \
    --namespace "$NAMESPACE" --create-namespace \
    --values "$ROOT/charts/sparkwire/ci/kind-values.yaml" --values "$HERE/e2e-values.yaml" \
    --set gateway.image.repository=sparkwire-gateway --set "gateway.image.tag=$TAG_gateway" \
    --set aggregator.image.repository=sparkwire-aggregator --set "aggregator.image.tag=$TAG_aggregator" \
    --wait --timeout 10m
fi

header "aggregator driver"
for _ in $(seq 1 120); do
  phase="$(kubectl_ -n "$NAMESPACE" get pods -l "spark-role=driver,sparkoperator.k8s.io/app-name=$RELEASE-aggregator" \
    -o jsonpath='{.items[*].status.phase}' 2>/dev/null || true)"
  [[ "$phase" == *Running* ]] && break
  sleep 5
done
kubectl_ -n "$NAMESPACE" get sparkapplications,pods -o wide
echo
echo "ready: .venv/bin/pytest tests/e2e/kind -rs   (gateway through http://127.0.0.1:18080)"
