"""The kind suite's library (tests/e2e/kind): sparkwire's real pipeline on the kind cluster of `make kind-up`,
driven and checked from this machine. The suite's conftest.py holds only the pytest fixtures that wire these
together; the pure parts (parsing kubectl, helm and Redis output, building commands and manifests, the waits)
have unit tests in tests/unit/harness/kind.

- ``settings``: the cluster, namespace and release (SPARKWIRE_* variables), the chart's names and selectors,
  the checkout's chart and values files.
- ``progress``: progress lines shown while pytest captures output.
- ``tools``: release.env of `make kind-up` (helm, skaffold, kind, kubectl and the images) and the commands.
- ``availability``: why the suite cannot run here (no Docker engine, cluster, release or ingress), if so.
- ``ingress``: HTTP through the cluster's ingress.
- ``kube``: the Kubernetes API on the release's namespace: pods, waits, the driver, the gateways' rollout.
- ``release``: what the deployed release is configured with, read from the cluster, and a client token.
- ``port_forward`` and ``redis_link``: the release's Redis from this machine, through `kubectl port-forward`.
- ``production`` and ``jobs``: deterministic events produced by a Job in the cluster; Jobs labelled as Kafka
  clients.
- ``clients``, ``checks`` and ``scenario``: clients through the ingress, a run under faults, the exactly-once
  checks.
- ``nodes`` and ``node_loss``: which node runs what, draining, stopping and starting a kind node.
- ``sentinels`` and ``replicated``: the chart's replicated Redis (Sentinels asked from inside their pods, a
  link on the current primary) and the switch of the release to it and back.

Used from a source checkout (it reads the chart and tests/e2e/kind/e2e-values.yaml there), with the
``kind`` extra (the Kubernetes client).
"""
