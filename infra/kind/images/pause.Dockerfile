# The pod sandbox's pause process (static C from the Kubernetes module, build-binaries.sh), as upstream's.
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
