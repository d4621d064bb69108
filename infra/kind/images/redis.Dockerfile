# Stand-in for the official redis image as the chart runs it (`redis-server` with its config as uid 999,
# `redis-cli` in the probes): Debian bookworm's Redis 7.0 — the version the local stack and every
# integration test run against.
ARG BASE=sparkwire-offline/debian:bookworm
FROM ${BASE}
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server redis-tools; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /data && chown 999:999 /data; \
    redis-server --version
WORKDIR /data
USER 999:999
