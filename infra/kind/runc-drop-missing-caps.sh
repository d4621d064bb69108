#!/usr/bin/env bash
# Installed by infra/kind/docker-engine.sh as the Docker engine's default runtime on machines whose
# capability bounding set lacks some capabilities (@CAPS@ here). Docker asks for every capability under
# --privileged, and runc then fails with "unable to apply caps"; this removes those capabilities from the
# container's OCI spec (config.json of `runc create --bundle`, process.json of `runc exec --process`) and
# runs the real runc. Nothing else is changed.
set -euo pipefail
DROP='@CAPS@'
spec=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --bundle | -b) spec="${args[i + 1]}/config.json" ;;
    --bundle=*) spec="${args[i]#--bundle=}/config.json" ;;
    --process | -p) spec="${args[i + 1]}" ;;
    --process=*) spec="${args[i]#--process=}" ;;
  esac
done
if [[ -n "$spec" && -f "$spec" ]]; then
  jq --arg drop "$DROP" '
    ($drop | split(" ")) as $gone
    | def strip: if type == "array" then map(select(. as $c | $gone | index($c) | not)) else . end;
      if has("process") then .process.capabilities |= (if . then with_entries(.value |= strip) else . end)
      else .capabilities |= (if . then with_entries(.value |= strip) else . end) end' \
    "$spec" > "$spec.tmp" && mv "$spec.tmp" "$spec"
fi
exec runc "$@"
