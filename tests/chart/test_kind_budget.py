"""The kind release fits its node: the CPU the scheduler counts (requests) of everything the chart runs with
the kind values, plus a user's job, the extra gateway pod of a rolling update and a test's producer, stays
within the 2 cores the node has left beside its own pods. Past it a pod stays Pending: the kind suite's
orders job once did, and `helm upgrade --wait` timed out on its unbound checkpoint claim."""

from __future__ import annotations

from pathlib import Path

from .conftest import CHART, FULLNAME, Obj, render

KIND_VALUES = [CHART / "ci" / "kind-values.yaml",
               Path(__file__).resolve().parents[1] / "e2e" / "kind" / "e2e-values.yaml"]
# Each of make kind-up's three nodes shows the machine's 2 cores, and all three share them: the release is
# held to what the control-plane node has left, so requests never promise more than the real 2 cores.
NODE_CPU_M = 2_000
# Measured on that node (kubectl describe node, no release): control plane, CoreDNS, CNI, Traefik and the
# Spark operator.
NODE_OWN_PODS_M = 1_055
KAFKA_CLIENT_JOB_M = 50  # a producer of the kind suite (harness/sparkwire_harness/kind/jobs.py), running beside the job
ORDERS_JOB = {"name": "orders", "stream": "orders", "module": "sparkwire.examples.orders", "kafkaTopic": "orders"}


def millicores(value: str | int | float) -> int:
    text = str(value)
    return int(text[:-1]) if text.endswith("m") else round(float(text) * 1000)


def requested_m(objects: list[Obj]) -> dict[str, int]:
    """CPU requested per object, pods times replicas; a SparkApplication's driver and executors."""
    out: dict[str, int] = {}
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in ("Deployment", "StatefulSet", "Job"):
            pod = obj["spec"]["template"]["spec"]
            per_pod = sum(millicores(c.get("resources", {}).get("requests", {}).get("cpu", 0))
                          for c in pod["containers"])
            out[f"{kind}/{name}"] = per_pod * obj["spec"].get("replicas", 1)
        elif kind == "SparkApplication":
            driver, executor = obj["spec"]["driver"], obj["spec"]["executor"]
            out[f"{kind}/{name}"] = (millicores(driver.get("coreRequest", driver.get("cores", 1)))
                                     + millicores(executor.get("coreRequest", executor.get("cores", 1)))
                                     * executor.get("instances", 1))
    return out


def test_the_kind_release_with_a_job_and_a_gateway_roll_fits_the_node() -> None:
    objects = render(KIND_VALUES, {"jobs": [ORDERS_JOB]})
    requested = requested_m(objects)
    assert {f"SparkApplication/{FULLNAME}-aggregator", f"SparkApplication/{FULLNAME}-job-orders"} <= set(requested)
    gateway = requested[f"Deployment/{FULLNAME}-gateway"] // 3  # maxSurge 1 of 3 replicas
    total = NODE_OWN_PODS_M + sum(requested.values()) + gateway + KAFKA_CLIENT_JOB_M
    assert total <= NODE_CPU_M, f"{total}m requested on a {NODE_CPU_M}m node: {requested}"
    print(f"{total}m of {NODE_CPU_M}m: {requested}")


def test_the_kind_release_with_the_replicated_redis_fits_the_node() -> None:
    """tests/e2e/kind/test_replicated_redis.py switches the release to `redis.replication.enabled` (three Redis
    pods with a Sentinel each; no user job then): with a gateway roll (the switch rolls them) and a producer."""
    objects = render(KIND_VALUES, {"redis.replication.enabled": True})
    requested = requested_m(objects)
    assert requested[f"StatefulSet/{FULLNAME}-redis"] == 3 * (50 + 20), requested
    gateway = requested[f"Deployment/{FULLNAME}-gateway"] // 3
    total = NODE_OWN_PODS_M + sum(requested.values()) + gateway + KAFKA_CLIENT_JOB_M
    assert total <= NODE_CPU_M, f"{total}m requested on a {NODE_CPU_M}m node: {requested}"
    print(f"{total}m of {NODE_CPU_M}m: {requested}")


def test_millicores_reads_both_notations() -> None:
    assert (millicores("100m"), millicores("1"), millicores(0.5), millicores(2)) == (100, 1000, 500, 2000)
