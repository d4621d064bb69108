#!/usr/bin/env bash
# The Debian base image every offline image starts from: `docker import` of a minbase rootfs made by
# mmdebstrap from Debian's packages (no image registry needed). Usage: debian-base.sh IMAGE_TAG [INPUTS]
#
# The machine's own extra CA certificates (/usr/local/share/ca-certificates, e.g. a TLS-inspecting egress
# proxy's) are trusted inside the image, and pip is pointed at the system bundle, so that builds on top of
# it reach PyPI and Maven Central the way the host does. On a machine without extra CAs nothing is added.
# INPUTS (optional) is recorded as the label sparkwire.inputs, which kind-up.sh checks before rebuilding.
set -euo pipefail
TAG="$1"
INPUTS="${2:-}"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
extra_cas=()
for crt in /usr/local/share/ca-certificates/*.crt; do [[ -f "$crt" ]] && extra_cas+=("$crt"); done
hooks=()
if ((${#extra_cas[@]})); then
  mkdir -p "$work/cas" && cp "${extra_cas[@]}" "$work/cas/"
  hooks+=(--customize-hook="mkdir -p \"\$1/usr/local/share/ca-certificates\"; cp $work/cas/*.crt \"\$1/usr/local/share/ca-certificates/\"; chroot \"\$1\" update-ca-certificates")
fi
# shellcheck disable=SC2016  # "$1" is the hook's argument (the rootfs), expanded by mmdebstrap's shell
mmdebstrap --variant=minbase --include=ca-certificates "${hooks[@]}" \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  "$SUITE" "$work/rootfs.tar" \
  "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY $SUITE-security main"
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["/bin/bash"]' --change "LABEL sparkwire.inputs=$INPUTS" \
  "$work/rootfs.tar" "$TAG"
