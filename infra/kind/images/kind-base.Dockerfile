# The kind node's base image (kind v0.30.0's images/base), built on the offline Debian base with Debian's
# containerd 1.6, runc and CNI plugins instead of kind's own builds (which need git clones of GitHub).
# Context: kind's images/base/files from the sigs.k8s.io/kind module (infra/kind/build-images.sh passes it).
ARG BASE=sparkwire-offline/debian:bookworm
FROM ${BASE}
COPY files/ /
# restrict_oom_score_adj: runc in a nested container cannot lower oom_score_adj below its parent's; with
# kind's default (false) every pod sandbox fails ("can't get final child's PID from pipe: EOF") here.
RUN set -eux; \
    chmod 0755 /usr/local/bin/* /kind/bin/*; \
    echo 'Dpkg::Options {"--force-confold";};' > /etc/apt/apt.conf.d/90confold; \
    DEBIAN_FRONTEND=noninteractive clean-install \
      systemd conntrack iptables nftables iproute2 ethtool util-linux mount kmod \
      libseccomp2 pigz fuse-overlayfs bash ca-certificates curl jq procps \
      containerd runc containernetworking-plugins; \
    find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete; \
    rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
          /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
          /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*; \
    echo "ReadKMsg=no" >> /etc/systemd/journald.conf; \
    ln -sf "$(command -v systemd)" /sbin/init; \
    for bin in containerd ctr containerd-shim-runc-v2; do ln -sf "/usr/bin/$bin" "/usr/local/bin/$bin"; done; \
    mkdir -p /opt/cni; ln -sfn /usr/lib/cni /opt/cni/bin; \
    systemctl enable kubelet.service containerd.service undo-mount-hacks.service; \
    systemctl mask systemd-binfmt.service; \
    mkdir -p /etc/kubernetes/manifests; \
    sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml; \
    grep -q 'restrict_oom_score_adj = true' /etc/containerd/config.toml; \
    ctr oci spec \
      | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
      | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json; \
    containerd --version; runc --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
