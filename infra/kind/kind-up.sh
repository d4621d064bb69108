#!/usr/bin/env bash
# `make kind-up`: a kind cluster running sparkwire, from nothing, idempotent (run it again after a change):
#
#   1. a Docker engine (docker-engine.sh: installed and started when none answers);
#   2. images: where Docker Hub is reachable, the published ones (kind's node image, Traefik, the Spark
#      operator's) and the project's Dockerfiles on their official bases; where it is not (this project's
#      sandboxes, air-gapped runners), everything built here from package registries: a Debian base
#      (debian-base.sh), Kubernetes, etcd, CoreDNS, kind, Traefik, the Spark operator, skaffold compiled from
#      the Go module proxy (build-binaries.sh), the images and the kind node image (build-images.sh);
#   3. the cluster `sparkwire`: a control plane and two workers (cluster/kind-offline.yaml with kube-router
#      and volumes on a directory every node mounts; cluster/kind-published.yaml with kind's kindnet);
#   4. Traefik (cluster/traefik.yaml), the Spark operator (spark-operator/install.sh), both sparkwire images
#      built and loaded, and the chart (charts/sparkwire with ci/kind-values.yaml + tests/e2e/kind/e2e-values.yaml);
#   5. .cache/kind/release.env: the images, binaries and build arguments in use (tests and skaffold read it).
#
# SPARKWIRE_KIND_IMAGES=offline|published forces the image source (default: published when Docker Hub
# answers). SPARKWIRE_KIND_SKIP_RELEASE=1 stops after the operator (skaffold installs the release itself).
# Every step prints its duration; the cold and warm totals measured here are in infra/kind/README.md.
set -euo pipefail
# shellcheck source=infra/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
CLUSTER=sparkwire
CONTEXT="kind-$CLUSTER"
NAMESPACE="${SPARKWIRE_NAMESPACE:-sparkwire}"
RELEASE=sparkwire
export PATH="$BIN:$CACHE/k8s/bin:$PATH" GOFLAGS=-buildvcs=false
T0="$(uptime_s)"
timed() {  # timed NAME COMMAND... : run a step, print its duration
  local name="$1" start; shift
  start="$(uptime_s)"
  "$@"
  printf '   [%s: %d s, %d s since start]\n' "$name" $(($(uptime_s) - start)) $(($(uptime_s) - T0))
}

# tag_by_id IMAGE : tag IMAGE also as REPOSITORY:<its ID's first 12 hex digits>; print that name.
tag_by_id() {
  local id
  id="$(docker image inspect --format '{{.Id}}' "$1")"
  docker tag "$1" "${1%:*}:${id:7:12}"
  echo "${1%:*}:${id:7:12}"
}

header "Docker engine"
timed docker bash "$HERE/docker-engine.sh"
timed disk bash "$HERE/reclaim-disk.sh"

mode="${SPARKWIRE_KIND_IMAGES:-auto}"
if [[ "$mode" == auto ]]; then
  # Docker Hub's registry answers 401 to an anonymous /v2/ when it is reachable.
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 8 https://registry-1.docker.io/v2/ || true)"
  if [[ "$code" == 401 ]]; then mode=published; else mode=offline; fi
  echo "image source: $mode (Docker Hub's registry answered: ${code:-nothing})"
fi
[[ "$mode" == offline || "$mode" == published ]] || { echo "ERROR: SPARKWIRE_KIND_IMAGES=$mode" >&2; exit 2; }

header "helm and the other chart tools (infra/k8s-tools.sh)"
timed k8s-tools bash "$ROOT/infra/k8s-tools.sh"

if [[ "$mode" == offline ]]; then
  header "Debian base image $DEBIAN_IMAGE (mmdebstrap)"
  fp="$(fingerprint "$HERE/debian-base.sh")"
  if image_fresh "$DEBIAN_IMAGE" "$fp"; then
    echo "up to date"
  else
    timed debian-base bash "$HERE/debian-base.sh" "$DEBIAN_IMAGE" "$fp"
  fi
  timed binaries bash "$HERE/build-binaries.sh"
  timed images bash "$HERE/build-images.sh"
  node_image="$NODE_IMAGE"; config="$HERE/cluster/kind-offline.yaml"
  # Tagged by image ID as well: a rebuilt image under an unchanged version tag would be loaded, but the
  # pods, whose spec did not change, would keep running the old one.
  traefik_image="$(tag_by_id "$TRAEFIK_IMAGE")"; operator_image="$(tag_by_id "$SPARK_OPERATOR_IMAGE")"
  build_args=(--build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" --build-arg "SPARK_IMAGE=$SPARK_IMAGE" --build-arg "MAVEN_IMAGE=$MAVEN_IMAGE")
  dependency_images=("$REDIS_IMAGE_REPOSITORY:$REDIS_IMAGE_TAG" "$KAFKA_IMAGE_REPOSITORY:$KAFKA_IMAGE_TAG")
else
  timed binaries bash "$HERE/build-binaries.sh" kind kubectl skaffold
  node_image=""; config="$HERE/cluster/kind-published.yaml"
  traefik_image="docker.io/library/traefik:${TRAEFIK_VERSION}"
  operator_image="ghcr.io/kubeflow/spark-operator/controller:${SPARK_OPERATOR_VERSION#v}"
  build_args=()
  dependency_images=()
  REDIS_IMAGE_REPOSITORY="" REDIS_IMAGE_TAG="" KAFKA_IMAGE_REPOSITORY="" KAFKA_IMAGE_TAG=""  # the chart's own
fi

header "cluster $CLUSTER"
# The volumes of the offline cluster: one host directory mounted into every node (cluster/kind-offline.yaml).
shared_storage="$CACHE/kind/volumes"
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  echo "exists"
else
  rm -rf "$shared_storage" && mkdir -p "$shared_storage"  # a deleted cluster's volumes
  sed "s|SHARED_STORAGE_DIR|$shared_storage|" "$config" > "$CACHE/kind/cluster.yaml"
  timed cluster kind create cluster --config "$CACHE/kind/cluster.yaml" ${node_image:+--image "$node_image"} --wait 300s
fi
kubectl config use-context "$CONTEXT" >/dev/null
kubectl_() { kubectl --context "$CONTEXT" "$@"; }
# Workloads on the control plane too: three nodes for the chart's three Redis and Kafka pods.
kubectl_ taint nodes "$CLUSTER-control-plane" node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null 2>&1 || true

# kube-router v2.1.0 fills its set of pod subnets (traffic between them is not masqueraded) from the nodes
# it sees when it starts, and misses a node that gets its podCIDR later: the control plane's, started
# before the workers joined, hid its pods behind the node's address when they called a worker's pods, and
# the NetworkPolicies refused them (its Sentinel never reached the others, so no failover). Restarted until
# every node's kube-router has every node's subnet.
kube_router_lacking() {  # the kube-router pods whose set of pod subnets lacks a node's
  local cidrs pod
  cidrs="$(kubectl_ get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR}{"\n"}{end}' | sort)"
  for pod in $(kubectl_ -n kube-system get pods -l k8s-app=kube-router -o name); do
    diff <(echo "$cidrs") <(kubectl_ -n kube-system exec "$pod" -c kube-router -- ipset list kube-router-pod-subnets \
      | awk '$1 ~ /\//{print $1}' | sort) >/dev/null 2>&1 || echo "$pod"
  done
}
if [[ -n "$node_image" ]]; then
  kubectl_ -n kube-system rollout status daemonset/kube-router --timeout=180s >/dev/null
  # Those pods deleted at once (their DaemonSet starts them again at once), not the DaemonSet rolled one node
  # after the other: ~15 s, not ~50; a started pod fills its set within seconds, so it is asked again soon.
  for attempt in 1 2 3 4 5 6; do
    lacking="$(kube_router_lacking)"
    [[ -n "$lacking" ]] || break
    if ((attempt % 3 == 1)); then
      echo "kube-router lacks a node's pod subnet in $(echo "$lacking" | tr '\n' ' '): starting those pods again"
      # shellcheck disable=SC2086  # one pod name a word
      kubectl_ -n kube-system delete $lacking --wait=false >/dev/null
      sleep 3
      kubectl_ -n kube-system rollout status daemonset/kube-router --timeout=180s >/dev/null
    fi
    sleep 5
  done
  [[ -z "$(kube_router_lacking)" ]] || { echo "ERROR: kube-router still lacks a node's pod subnet" >&2; exit 1; }
fi
# node_image_id NODE IMAGE : the ID Docker gives IMAGE (its config's digest) as NODE's containerd holds it, or
# nothing. The node image has ctr, not crictl (which this asked before, so every image was loaded again on
# every kind-up: ~4 min of a warm one).
node_image_id() {
  local ref="$2" manifest
  case "$ref" in  # containerd's full name: Docker Hub's host and library/ written out
    */*) [[ "${ref%%/*}" == *[.:]* ]] || ref="docker.io/$ref" ;;
    *) ref="docker.io/library/$ref" ;;
  esac
  manifest="$(docker exec "$1" ctr --namespace=k8s.io images ls "name==$ref" 2>/dev/null | awk 'NR == 2 {print $3}')"
  [[ -n "$manifest" ]] || return 0
  docker exec "$1" ctr --namespace=k8s.io content get "$manifest" 2>/dev/null \
    | sed -n 's/.*"config":{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p'
}

# load IMAGE... : each image into every node's containerd unless it holds that image ID already. Streamed
# (docker save | ctr import), where `kind load docker-image` first writes an archive to $TMPDIR: 1 GB of
# disk per image and node that the machine may not have.
load() {
  [[ "$mode" == offline ]] || return 0
  local image id node fifos pid status
  for image in "$@"; do
    id="$(docker image inspect --format '{{.Id}}' "$image")"
    local -a missing=() pids=()
    for node in $(kind get nodes --name "$CLUSTER"); do
      [[ "$(node_image_id "$node" "$image")" == "$id" ]] || missing+=("$node")
    done
    ((${#missing[@]})) || continue
    # One `docker save`, streamed into every node that lacks the image at once (tee into a FIFO a node): the
    # nodes one after the other took ~35 s per GB per node here.
    fifos="$(mktemp -d)"
    for node in "${missing[@]}"; do
      mkfifo "$fifos/$node"
      docker exec -i "$node" ctr --namespace=k8s.io images import --all-platforms --digests \
        --snapshotter=overlayfs - <"$fifos/$node" >/dev/null &
      pids+=($!)
    done
    status=0
    docker save "$image" | tee "${missing[@]/#/$fifos/}" >/dev/null || status=$?
    for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
    rm -rf "$fifos"
    ((status == 0)) || { echo "ERROR: loading $image into ${missing[*]} failed" >&2; return "$status"; }
  done
}

header "Traefik $TRAEFIK_VERSION (ingress controller, class traefik, on 127.0.0.1:18080)"
load "$traefik_image"
sed "s|image: TRAEFIK_IMAGE|image: $traefik_image|" "$HERE/cluster/traefik.yaml" | kubectl_ apply -f - >/dev/null
timed traefik kubectl_ -n traefik rollout status deployment/traefik --timeout 180s

header "Spark operator $SPARK_OPERATOR_VERSION (spark-operator/install.sh)"
load "$operator_image"
operator_chart="$(go_module_dir "github.com/kubeflow/spark-operator/v2@$SPARK_OPERATOR_VERSION")/charts/spark-operator-chart"
operator_repo="${operator_image%:*}"
timed operator env SPARKWIRE_NAMESPACE="$NAMESPACE" SPARK_OPERATOR_CHART="$operator_chart" HELM="$CACHE/k8s/bin/helm" \
  KUBECTL=kubectl bash "$ROOT/spark-operator/install.sh" -- \
  --set "image.registry=${operator_repo%%/*}" --set "image.repository=${operator_repo#*/}" \
  --set "image.tag=${operator_image##*:}" --kube-context "$CONTEXT"

# Tag = the image's own ID: a rebuild with changes gets a new tag (helm then rolls the pods), an unchanged one
# keeps it.
declare -A tags
for component in gateway aggregator; do
  header "image sparkwire-$component"
  timed "image $component" docker_build -f "$ROOT/images/$component/Dockerfile" "${build_args[@]}" \
    -t "sparkwire-$component:build" "$ROOT"
  id="$(docker image inspect --format '{{.Id}}' "sparkwire-$component:build")"
  tags[$component]="${id:7:12}"
  docker tag "sparkwire-$component:build" "sparkwire-$component:${tags[$component]}"
  timed "load $component" load "sparkwire-$component:${tags[$component]}"
done

if ((${#dependency_images[@]})); then
  header "Redis and Kafka images"
  timed "load dependencies" load "${dependency_images[@]}"
fi
# The chart values of images that differ from its defaults here: for every helm install of the release
# (below, the tests, skaffold's kind profile through release.env).
image_values=(
  --set gateway.image.repository=sparkwire-gateway --set-string "gateway.image.tag=${tags[gateway]}"
  --set aggregator.image.repository=sparkwire-aggregator --set-string "aggregator.image.tag=${tags[aggregator]}"
)
[[ -n "$REDIS_IMAGE_REPOSITORY" ]] && image_values+=(
  --set "redis.image.repository=$REDIS_IMAGE_REPOSITORY" --set-string "redis.image.tag=$REDIS_IMAGE_TAG"
  --set "kafka.deploy.image.repository=$KAFKA_IMAGE_REPOSITORY" --set-string "kafka.deploy.image.tag=$KAFKA_IMAGE_TAG")

mkdir -p "$CACHE/kind"
cat > "$CACHE/kind/release.env" <<ENV
# Written by infra/kind/kind-up.sh ($mode images): what the kind tests and skaffold use.
SPARKWIRE_KIND_IMAGES=$mode
SPARKWIRE_KIND_CONTEXT=$CONTEXT
SPARKWIRE_NAMESPACE=$NAMESPACE
SPARKWIRE_RELEASE=$RELEASE
SPARKWIRE_GATEWAY_IMAGE_REPOSITORY=sparkwire-gateway
SPARKWIRE_GATEWAY_IMAGE_TAG=${tags[gateway]}
SPARKWIRE_AGGREGATOR_IMAGE_REPOSITORY=sparkwire-aggregator
SPARKWIRE_AGGREGATOR_IMAGE_TAG=${tags[aggregator]}
SPARKWIRE_HELM=$CACHE/k8s/bin/helm
SPARKWIRE_KUBECTL=$(command -v kubectl)
SPARKWIRE_SKAFFOLD=$BIN/skaffold
SPARKWIRE_KIND_BIN=$BIN
SPARKWIRE_PYTHON_IMAGE=$([[ $mode == offline ]] && echo "$PYTHON_IMAGE")
SPARKWIRE_SPARK_IMAGE=$([[ $mode == offline ]] && echo "$SPARK_IMAGE")
SPARKWIRE_MAVEN_IMAGE=$([[ $mode == offline ]] && echo "$MAVEN_IMAGE")
SPARKWIRE_REDIS_IMAGE_REPOSITORY=$REDIS_IMAGE_REPOSITORY
SPARKWIRE_REDIS_IMAGE_TAG=$REDIS_IMAGE_TAG
SPARKWIRE_KAFKA_IMAGE_REPOSITORY=$KAFKA_IMAGE_REPOSITORY
SPARKWIRE_KAFKA_IMAGE_TAG=$KAFKA_IMAGE_TAG
# Every image value as helm arguments (one line, space-separated), for any helm install of the release.
SPARKWIRE_HELM_IMAGE_ARGS="${image_values[*]}"
ENV

if [[ "${SPARKWIRE_KIND_SKIP_RELEASE:-0}" != 1 ]]; then
  header "helm upgrade --install $RELEASE (namespace $NAMESPACE)"
  # A helm process killed mid-operation (a session or test ended under it) leaves the release pending-*,
  # and every later upgrade fails with "another operation is in progress": undo the unfinished operation.
  status="$(helm --kube-context "$CONTEXT" -n "$NAMESPACE" status "$RELEASE" -o json 2>/dev/null \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["info"]["status"])' 2>/dev/null || true)"
  case "$status" in
    pending-install)
      echo "release $RELEASE is $status (an install was interrupted): uninstalling it first"
      helm --kube-context "$CONTEXT" -n "$NAMESPACE" uninstall "$RELEASE" --wait ;;
    pending-upgrade | pending-rollback)
      echo "release $RELEASE is $status (an operation was interrupted): rolling back to the last deployed revision"
      helm --kube-context "$CONTEXT" -n "$NAMESPACE" rollback "$RELEASE" --wait --timeout 5m ;;
  esac
  timed release helm --kube-context "$CONTEXT" upgrade --install "$RELEASE" "$ROOT/charts/sparkwire" \
    --namespace "$NAMESPACE" --create-namespace \
    --values "$ROOT/charts/sparkwire/ci/kind-values.yaml" --values "$ROOT/tests/e2e/kind/e2e-values.yaml" \
    "${image_values[@]}" --wait --timeout 10m

  header "aggregator driver"
  wait_driver() {
    for _ in $(seq 1 120); do
      phase="$(kubectl_ -n "$NAMESPACE" get pods -l "spark-role=driver,sparkoperator.k8s.io/app-name=$RELEASE-aggregator" \
        -o jsonpath='{.items[*].status.phase}' 2>/dev/null || true)"
      [[ "$phase" == *Running* ]] && return 0
      sleep 5
    done
    echo "ERROR: no running Spark driver after 10 min" >&2
    kubectl_ -n "$NAMESPACE" get sparkapplications,pods -o wide >&2
    return 1
  }
  timed driver wait_driver
  kubectl_ -n "$NAMESPACE" get sparkapplications,pods -o wide
fi
printf '\nkind-up done in %d s (%s images). Gateway through http://127.0.0.1:18080/?stream=metrics\n' \
  $(($(uptime_s) - T0)) "$mode"
echo "next: make e2e-kind   (or .venv/bin/pytest tests/e2e/kind)"
