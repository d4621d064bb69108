"""The chart's NetworkPolicies are enforced by the cluster's CNI (kube-router on the offline cluster, kindnet
on the published one), not only accepted by the API server: two probe pods in the release's namespace try a
TCP connection to Kafka, Redis and the gateway Service; one carries the chart's Kafka-client label
(`networkPolicy.kafkaClientLabel`), the other none.

Expected, from the policies (charts/sparkwire/templates/*/networkpolicy.yaml): the labelled pod reaches
Kafka; the unlabelled one reaches neither Kafka nor Redis (Redis takes only the gateways and the Spark
pods), yet reaches the gateway (any source may, `networkPolicy.gatewayFrom` being empty) — so its refusals
are the policies', not a broken network. A cluster whose CNI ignores policies fails the second probe.
"""

from __future__ import annotations

import json
import uuid

import pytest

from sparkwire_harness.kind.jobs import job_logs, start_kafka_client_job, wait_job
from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.release import Release
from sparkwire_harness.kind.settings import FULLNAME

pytestmark = pytest.mark.slow

# For each target in turn: TCP connections tried for up to SECONDS until one opens; "open after N s", or
# the last error. Retried because the CNI programs its policy rules for a new pod's address a few seconds
# after the pod starts (kube-router watches pods): until then a new Kafka client is refused too.
PROBE = """
import json, socket, sys, time
seconds, result = float(sys.argv[1]), {}
for target in sys.argv[2:]:
    host, port = target.rsplit(":", 1)
    start = time.monotonic()
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            result[target] = "open after %.0f s" % (time.monotonic() - start)
            break
        except OSError as error:
            result[target] = type(error).__name__ + ": " + str(error)
        if time.monotonic() - start > seconds:
            break
        time.sleep(1)
print("PROBE " + json.dumps(result))
"""
WAIT_S = 30  # far beyond the CNI's few seconds; a refused target is tried this long


def probe(kube: Kube, release: Release, targets: list[str], kafka_client: bool) -> dict[str, str]:
    name = f"probe-{'client' if kafka_client else 'other'}-{uuid.uuid4().hex[:6]}"
    command = ["python3", "-c", PROBE, str(WAIT_S), *targets]
    start_kafka_client_job(kube, release.gateway_image, name, command, kafka_client=kafka_client)
    wait_job(kube, name, timeout=180 + WAIT_S * len(targets))
    line = next(line for line in job_logs(kube, name).splitlines() if line.startswith("PROBE "))
    result: dict[str, str] = json.loads(line.removeprefix("PROBE "))
    kube.note(f"{name}: {result}")
    return result


def test_policies_let_kafka_clients_in_and_keep_other_pods_out(kube: Kube, release: Release) -> None:
    kafka = release.bootstrap_servers.split(",")[0]
    redis, gateway = f"{FULLNAME}-redis:6379", f"{FULLNAME}-gateway:80"
    client = probe(kube, release, [kafka], kafka_client=True)
    assert client[kafka].startswith("open"), f"a labelled Kafka client cannot reach {kafka}: {client}"
    # The gateway first: once it opens, the pod's network is up, and the refusals after it are the policies'.
    other = probe(kube, release, [gateway, kafka, redis], kafka_client=False)
    assert other[gateway].startswith("open"), f"an unlabelled pod cannot reach the gateway (no network?): {other}"
    assert not other[kafka].startswith("open"), f"an unlabelled pod reached Kafka: policies not enforced: {other}"
    assert not other[redis].startswith("open"), f"an unlabelled pod reached Redis: policies not enforced: {other}"
