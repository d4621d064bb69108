# The kubeflow Spark operator v2.5.0 image (ghcr.io/kubeflow/spark-operator/controller:2.5.0; the chart's
# controller and webhook), rebuilt without an image registry the way upstream's Dockerfile does it: FROM a
# Spark image (here the offline stand-in, whose spark-submit the operator runs: SPARK_HOME=/opt/spark,
# JAVA_HOME=/opt/java/openjdk with java on PATH), tini (already in the Spark stand-in, from Debian),
# /etc/k8s-webhook-server/serving-certs writable by uid 185 (the webhook writes its certificates there) and
# /home/spark, the operator binary (compiled from the Go module proxy by infra/kind/build-binaries.sh into
# .cache/kind/bin/spark-operator) and an entrypoint with upstream's behaviour (spark-operator-entrypoint.sh).
#
# Build context: a tar stream of exactly the three files it uses (the binary lives outside the repository's
# files, under .cache, which the root .dockerignore keeps out; -h follows a symlinked binary; each -C is
# relative to the one before, hence "$PWD"), from the repository root:
#   tar -chf - -C infra/kind/images spark-operator.Dockerfile spark-operator-entrypoint.sh \
#       -C "$PWD/.cache/kind/bin" spark-operator \
#     | docker build -f spark-operator.Dockerfile -t sparkwire-offline/spark-operator:v2.5.0 -
ARG SPARK_IMAGE=sparkwire-offline/spark:4.2.0
FROM ${SPARK_IMAGE}
ARG SPARK_UID=185
ARG SPARK_GID=185
USER root
COPY spark-operator /usr/bin/spark-operator
COPY spark-operator-entrypoint.sh /usr/bin/entrypoint.sh
RUN set -eux; \
    if ! [ -x /usr/bin/tini ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    test -x /usr/bin/spark-operator; \
    chmod 0755 /usr/bin/entrypoint.sh; \
    mkdir -p /etc/k8s-webhook-server/serving-certs /home/spark; \
    chmod -R g+rw /etc/k8s-webhook-server/serving-certs; \
    chown -R spark /etc/k8s-webhook-server/serving-certs /home/spark; \
    /usr/bin/spark-operator --help > /dev/null; \
    "$SPARK_HOME/bin/spark-submit" --version
USER ${SPARK_UID}:${SPARK_GID}
ENTRYPOINT ["/usr/bin/entrypoint.sh"]
