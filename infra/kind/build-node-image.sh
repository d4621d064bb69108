#!/usr/bin/env bash
# Assembles the kind node image the way `kind build node-image` does, with no pulls: kind's base image
# (build-images.sh) + kubeadm, kubelet and kubectl + every image kubeadm and kind start, and the release's
# seldom-changing third-party images, imported into the node's containerd (pinned, so the kubelet never
# garbage-collects them), + the default CNI and storage manifests kind applies at cluster creation. Skipped
# while its inputs (the images' IDs, the binaries, the manifests, this script) are unchanged: their
# fingerprint is the image's label sparkwire.inputs.
set -euo pipefail
# shellcheck source=infra/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PRELOADED=(
  "registry.k8s.io/kube-apiserver:$KUBERNETES_VERSION" "registry.k8s.io/kube-controller-manager:$KUBERNETES_VERSION"
  "registry.k8s.io/kube-scheduler:$KUBERNETES_VERSION" "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION"
  "registry.k8s.io/etcd:$ETCD_IMAGE_TAG" "registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
  "registry.k8s.io/pause:$PAUSE_VERSION" registry.k8s.io/pause:3.10
  "$LOCAL_PATH_PROVISIONER_IMAGE" "$DEBIAN_IMAGE" "$KUBE_ROUTER_IMAGE"
)
# And the third-party images of the release that change seldom: kind-up loaded them into every node of every
# cluster it created, ~4 of its ~10 min (each node's import hashes and unpacks ~2 GB; here the node's volume
# is a plain copy, and only the node that runs a pod unpacks its image). Also under their ID tag, the name
# kind-up deploys Traefik and the operator by (kind-up.sh, tag_by_id).
RELEASE_IMAGES=(
  "$TRAEFIK_IMAGE" "$SPARK_OPERATOR_IMAGE" "$REDIS_IMAGE_REPOSITORY:$REDIS_IMAGE_TAG"
  "$KAFKA_IMAGE_REPOSITORY:$KAFKA_IMAGE_TAG"
)

# kind's own local-path-provisioner manifest (sigs.k8s.io/kind, pkg/build/nodeimage/const_storage.go), with
# our images (the provisioner built here, and the Debian base as its helper pod: it needs only sh, mkdir, rm),
# and one change: volumes live on a file system every node mounts (sharedFileSystemPath; kind-up mounts one
# host directory into each node there), so a PersistentVolume has no node affinity and its pod can start on
# another node when its node is lost, as with the network-attached disks of a cloud cluster. Node-local
# volumes would pin the Spark checkpoint, Redis and Kafka to one node.
storage_manifest() {
  local kind_dir
  kind_dir="$(go_module_dir "sigs.k8s.io/kind@$KIND_VERSION")"
  python3 - "$kind_dir/pkg/build/nodeimage/const_storage.go" "$LOCAL_PATH_PROVISIONER_IMAGE" "$DEBIAN_IMAGE" <<'PY'
import re, sys
source, provisioner, helper = sys.argv[1:]
text = open(source).read()
text = text.replace("` + storageProvisionerImage + `", provisioner).replace("` + storageHelperImage + `", helper)
manifest = re.search(r"const defaultStorageManifest = `(.*?)`\n", text, re.S).group(1)
assert "+ storage" not in manifest and provisioner in manifest, "kind's storage manifest changed shape"
node_paths = re.search(r'\{\s*"nodePathMap":\[.*?\]\s*\}\s*\]\s*\}', manifest, re.S)
assert node_paths and "/var/local-path-provisioner" in node_paths.group(0), "kind's storage config changed shape"
manifest = manifest.replace(node_paths.group(0), '{"sharedFileSystemPath": "/var/local-path-provisioner"}')
print(manifest)
PY
}

inputs="$(
  for img in "${PRELOADED[@]}" "${RELEASE_IMAGES[@]}" "$KIND_BASE_IMAGE"; do docker image inspect --format '{{.Id}}' "$img"; done
  # Contents only, not paths: another checkout (CI's fresh clone, a developer's) is not a new input.
  sha256sum "$BIN"/{kubeadm,kubelet,kubectl} "$HERE/node/kube-router.yaml" "$HERE/versions.sh" "${BASH_SOURCE[0]}" \
    | cut -d' ' -f1
)"
fp="$(sha256sum <<<"$inputs" | cut -d' ' -f1)"
if image_fresh "$NODE_IMAGE" "$fp"; then
  echo "  $NODE_IMAGE: up to date"; exit 0
fi

start="$(uptime_s)"
builder="sparkwire-node-build-$$"
docker run -d --name "$builder" --entrypoint sleep --security-opt seccomp=unconfined "$KIND_BASE_IMAGE" infinity >/dev/null
trap 'docker rm -f -v "$builder" >/dev/null 2>&1' EXIT
for binary in kubeadm kubelet kubectl; do docker cp "$BIN/$binary" "$builder:/usr/bin/$binary"; done
docker exec "$builder" sh -c "printf '%s' '$KUBERNETES_VERSION' > /kind/version && mkdir -p /kind/manifests"
sed "s|KUBE_ROUTER_IMAGE|$KUBE_ROUTER_IMAGE|" "$HERE/node/kube-router.yaml" \
  | docker exec -i "$builder" sh -c 'cat > /kind/manifests/default-cni.yaml'
storage_manifest | docker exec -i "$builder" sh -c 'cat > /kind/manifests/default-storage.yaml'
docker exec "$builder" bash -c 'containerd >/tmp/containerd.log 2>&1 & for _ in $(seq 1 30); do ctr version >/dev/null 2>&1 && exit 0; sleep 1; done; cat /tmp/containerd.log; exit 1'
for img in "${PRELOADED[@]}" "${RELEASE_IMAGES[@]}"; do
  names=("$img")
  if [[ " ${RELEASE_IMAGES[*]} " == *" $img "* ]]; then
    id="$(docker image inspect --format '{{.Id}}' "$img")"
    docker tag "$img" "${img%:*}:${id:7:12}" && names+=("${img%:*}:${id:7:12}")
  fi
  docker save "${names[@]}" | docker exec -i "$builder" ctr --namespace=k8s.io images import \
    --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
  echo "  preloaded ${names[*]}"
done
docker exec "$builder" sh -c 'pkill containerd; sleep 2; rm -f /tmp/containerd.log'
docker commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
  --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' --change "LABEL sparkwire.inputs=$fp" \
  "$builder" "$NODE_IMAGE" >/dev/null
echo "  $NODE_IMAGE ($(($(uptime_s) - start)) s)"
