#!/bin/bash
# Entrypoint of sparkwire-offline/spark-operator (infra/kind/images/spark-operator.Dockerfile). Written for
# this project; it behaves like the kubeflow/spark-operator v2.5.0 image's entrypoint.sh:
#   - when the container's uid has no passwd entry (an arbitrary uid, e.g. OpenShift's), it fakes one
#     through libnss_wrapper (LD_PRELOAD + temporary passwd/group files: user and group `spark`, home
#     $SPARK_HOME), so that getpwuid() in spark-submit's JVM and in the operator succeeds;
#   - then execs the operator under tini (-s: reap zombies even when not PID 1) with all arguments.
set -euo pipefail

uid="$(id -u)"
if ! getent passwd "$uid" > /dev/null 2>&1; then
  for lib in /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so /lib/*/libnss_wrapper.so /lib/libnss_wrapper.so; do
    [[ -s "$lib" ]] || continue
    gid="$(id -g)"
    NSS_WRAPPER_PASSWD="$(mktemp)"
    NSS_WRAPPER_GROUP="$(mktemp)"
    printf 'spark:x:%s:%s:%s:%s:/bin/false\n' "$uid" "$gid" "${SPARK_USER_NAME:-anonymous uid}" "${SPARK_HOME:-}" \
      > "$NSS_WRAPPER_PASSWD"
    printf 'spark:x:%s:\n' "$gid" > "$NSS_WRAPPER_GROUP"
    export LD_PRELOAD="$lib" NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
    break
  done
fi

exec /usr/bin/tini -s -- /usr/bin/spark-operator "$@"
