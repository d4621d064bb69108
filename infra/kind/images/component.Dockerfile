# One Kubernetes component from a binary built by infra/kind/build-binaries.sh, on the offline Debian base,
# tagged by build-images.sh under the upstream name kubeadm/kind expect (registry.k8s.io/kube-apiserver:...).
# Context: a directory holding just the binary. PACKAGES: Debian packages it needs (kube-proxy: iptables).
ARG BASE=sparkwire-offline/debian:bookworm
FROM ${BASE}
ARG BINARY
ARG PACKAGES=""
RUN if [ -n "${PACKAGES}" ]; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${PACKAGES} \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY ${BINARY} /usr/local/bin/
# Some manifests run the image's entrypoint (CoreDNS: /coredns), others name the binary on PATH.
RUN ln -s "/usr/local/bin/${BINARY}" /usr/local/bin/component-entrypoint && ln -s "/usr/local/bin/${BINARY}" "/${BINARY}"
ENTRYPOINT ["/usr/local/bin/component-entrypoint"]
