#!/usr/bin/env bash
# Every image the offline kind cluster runs, built here from the binaries of build-binaries.sh and Debian's
# packages (no image registry): usage build-images.sh (after debian-base.sh and build-binaries.sh).
#   1. stand-ins for the official bases the project's Dockerfiles default to (python, spark, maven) and the
#      Spark operator (infra/kind/images/*.Dockerfile, README there);
#   2. kind's base image and every image kubeadm/kind start, under their upstream names;
#   3. the kind node image with those preloaded into its containerd (what `kind build node-image` does, but
#      it would try to pull what it is not given).
# Each image is rebuilt only when its inputs changed (Docker's layer cache; the node image by a stamp).
set -euo pipefail
# shellcheck source=infra/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
CTX="$CACHE/kind/ctx"

# image TAG DOCKERFILE CONTEXT [docker build args...]
image() {
  local tag="$1" dockerfile="$2" context="$3"; shift 3
  local start; start="$(uptime_s)"
  docker_build -f "$dockerfile" -t "$tag" "$@" "$context"
  echo "  $tag ($(($(uptime_s) - start)) s)"
}
# context_of NAME FILE... : a build context holding just these files (hard links: no copy of 100 MB binaries)
context_of() {
  local dir="$CTX/$1"; shift
  rm -rf "$dir" && mkdir -p "$dir"
  ln -f "$@" "$dir/" 2>/dev/null || cp "$@" "$dir/"
  echo "$dir"
}

header "Base images (stand-ins for the official ones: no registry here)"
image "$PYTHON_IMAGE" "$HERE/images/python.Dockerfile" "$HERE/images"
image "$SPARK_IMAGE" "$HERE/images/spark.Dockerfile" "$HERE/images"
image "$MAVEN_IMAGE" "$HERE/images/maven.Dockerfile" "$HERE/images"

header "Redis and Kafka (stand-ins for the chart's redis and apache/kafka images)"
image "$REDIS_IMAGE_REPOSITORY:$REDIS_IMAGE_TAG" "$HERE/images/redis.Dockerfile" "$HERE/images"
image "$KAFKA_IMAGE_REPOSITORY:$KAFKA_IMAGE_TAG" "$HERE/images/kafka.Dockerfile" \
  "$(context_of kafka "$HERE/images/kafka/kafka-run-class.sh" "$ROOT/infra/maven/kafka/pom.xml" "$ROOT/infra/kafka/log4j2.properties")" \
  --build-arg "MAVEN_IMAGE=$MAVEN_IMAGE" --build-arg "SPARK_IMAGE=$SPARK_IMAGE"

header "Spark operator $SPARK_OPERATOR_VERSION"
image "$SPARK_OPERATOR_IMAGE" "$HERE/images/spark-operator.Dockerfile" \
  "$(context_of spark-operator "$BIN/spark-operator" "$HERE/images/spark-operator-entrypoint.sh")" \
  --build-arg "SPARK_IMAGE=$SPARK_IMAGE"

header "Traefik $TRAEFIK_VERSION (ingress controller)"
image "$TRAEFIK_IMAGE" "$HERE/images/component.Dockerfile" "$(context_of traefik "$BIN/traefik")" --build-arg BINARY=traefik

header "kind $KIND_VERSION base image (Debian's containerd, runc and CNI plugins)"
kind_dir="$(go_module_dir "sigs.k8s.io/kind@$KIND_VERSION")"
rm -rf "$CTX/kind-base" && mkdir -p "$CTX/kind-base" && cp -r "$kind_dir/images/base/files" "$CTX/kind-base/"
chmod -R u+w "$CTX/kind-base"
image "$KIND_BASE_IMAGE" "$HERE/images/kind-base.Dockerfile" "$CTX/kind-base"

header "Kubernetes $KUBERNETES_VERSION control-plane images (upstream names, as kubeadm expects)"
component() {  # TAG BINARY [PACKAGES] [EXTRA FILES...]
  local tag="$1" binary="$2" packages="${3:-}"; shift 3 || shift $#
  image "$tag" "$HERE/images/component.Dockerfile" "$(context_of "$binary" "$BIN/$binary" "$@")" \
    --build-arg "BINARY=$binary" --build-arg "PACKAGES=$packages"
}
for binary in kube-apiserver kube-controller-manager kube-scheduler; do
  component "registry.k8s.io/$binary:$KUBERNETES_VERSION" "$binary"
done
component "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" kube-proxy "iptables conntrack ipset kmod"
component "registry.k8s.io/etcd:$ETCD_IMAGE_TAG" etcd "" "$BIN/etcdctl"
component "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" coredns
component "$LOCAL_PATH_PROVISIONER_IMAGE" local-path-provisioner
# The CNI (node/kube-router.yaml): iptables, ipset, ip and conntrack are what it runs.
component "$KUBE_ROUTER_IMAGE" kube-router "iptables ipset iproute2 conntrack kmod"
image "registry.k8s.io/pause:$PAUSE_VERSION" "$HERE/images/pause.Dockerfile" "$(context_of pause "$BIN/pause")"
# kind's containerd config names pause:3.10 as the sandbox image; kubeadm v1.34 pre-pulls 3.10.1.
docker tag "registry.k8s.io/pause:$PAUSE_VERSION" registry.k8s.io/pause:3.10

header "kind node image $NODE_IMAGE"
bash "$HERE/build-node-image.sh"
