# Offline stand-in for python:3.11-slim-bookworm (the PYTHON_IMAGE of images/gateway and images/aggregator),
# built from Debian's packages only (no image registry). Provides what those Dockerfiles use from it:
#   python / python3 / pip / pip3 on PATH (Debian's python3.11, python3-venv, python3-pip), `python -m venv`,
#   `pip install` / `pip wheel` as root without a PEP 668 refusal (the official image has no
#   EXTERNALLY-MANAGED marker, so neither has this one), groupadd/useradd (passwd, in the base),
#   plus what the official slim image also carries: ca-certificates, netbase, tzdata, LANG=C.UTF-8.
# Differences that do not matter to the project's Dockerfiles: the interpreter is /usr/bin/python3.11 (3.11.2
# with Debian's security patches) instead of a source build in /usr/local; root's `pip install` lands in
# /usr/local/lib/python3.11/dist-packages, ahead of Debian's own /usr/lib/python3/dist-packages on sys.path.
#
#   docker build -f infra/kind/images/python.Dockerfile -t sparkwire-offline/python:3.11 infra/kind/images
ARG BASE=sparkwire-offline/debian:bookworm
FROM ${BASE}
ENV LANG=C.UTF-8
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3.11 python3-venv python3-pip python-is-python3 netbase tzdata; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log; \
    rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED; \
    test -x /usr/bin/pip || ln -s pip3 /usr/bin/pip; \
    python --version; pip --version; python -m venv --help > /dev/null
CMD ["python3"]
