#!/usr/bin/env bash
# Frees the Docker engine's disk of what earlier kind-ups, builds and clusters left behind, then checks that
# enough is free for a kind-up (kind-up.sh runs it first). Every machine that runs `make e2e-kind` again and
# again (a CI runner, a developer's laptop) otherwise fills up: CI once failed with "no space left on device"
# while loading an image, with 45 GB held by the leftovers below.
#   - containers that were created and never started: the legacy builder leaves its intermediate containers
#     when a build is interrupted;
#   - anonymous volumes no container uses: a kind node's /var (its containerd images, 5-10 GB) when the node
#     container was removed without -v;
#   - tags of sparkwire-gateway and sparkwire-aggregator other than :build (kind-up tags each build by its
#     image ID, so every change leaves one more 0.3-1 GB image);
#   - dangling images: earlier builds of a tag that was built again (node images, base images). Builder
#     cache layers of a final stage are not dangling (they are parents of tagged images) and stay; the other
#     stages of a multi-stage build would be, and docker_build (infra/lib.sh) tags them so that they stay.
# Then it fails, with what uses the disk, when less than SPARKWIRE_KIND_MIN_FREE_GB (default 12) is free.
set -euo pipefail
# shellcheck source=infra/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
MIN_FREE_GB="${SPARKWIRE_KIND_MIN_FREE_GB:-12}"

free_gb() { df --output=avail -BG "$1" | tail -1 | tr -dc '0-9'; }
root_dir="$(docker info --format '{{.DockerRootDir}}')"
before="$(free_gb "$root_dir")"

mapfile -t never_started < <(docker ps -aq --filter status=created)
((${#never_started[@]} == 0)) || docker rm -v "${never_started[@]}" >/dev/null

# Anonymous volumes are named by 64 hex digits; named ones may be someone's data and are left alone.
mapfile -t orphans < <(docker volume ls -q --filter dangling=true | grep -E '^[0-9a-f]{64}$' || true)
((${#orphans[@]} == 0)) || docker volume rm "${orphans[@]}" >/dev/null

mapfile -t old_tags < <(docker images --format '{{.Repository}}:{{.Tag}}' sparkwire-gateway;
  docker images --format '{{.Repository}}:{{.Tag}}' sparkwire-aggregator)
stale=()
for tag in "${old_tags[@]}"; do [[ "$tag" == *:build ]] || stale+=("$tag"); done
((${#stale[@]} == 0)) || docker rmi "${stale[@]}" >/dev/null

docker image prune -f >/dev/null
after="$(free_gb "$root_dir")"
echo "disk: ${after} GB free on $root_dir (reclaimed $((after - before)) GB: ${#never_started[@]} unstarted" \
  "containers, ${#orphans[@]} orphaned volumes, ${#stale[@]} old sparkwire image tags, dangling images)"
if ((after < MIN_FREE_GB)); then
  echo "ERROR: a kind-up needs ~${MIN_FREE_GB} GB free on $root_dir; ${after} GB are. What uses the disk:" >&2
  docker system df >&2
  du -xsh /tmp /root/.cache 2>/dev/null >&2 || true
  echo "(SPARKWIRE_KIND_MIN_FREE_GB lowers the bar, at the risk of a failure while loading images)" >&2
  exit 1
fi
