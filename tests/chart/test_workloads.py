"""What the pods look like: hardening on every pod and container (the Spark pod templates included),
probes and draining of the gateway, Redis durability, the SparkApplication and the network paths."""

from __future__ import annotations

from typing import Any

import pytest

from sparkwire.spark.runtime.session import QUICK_JIT

from .conftest import (
    CHART,
    CI_VALUES,
    FULLNAME,
    MIN_KUBE_VERSION,
    Obj,
    env_of,
    find,
    pod_specs,
    render,
)

SCENARIOS = [pytest.param(None, id="defaults")] + [pytest.param(p, id=p.stem) for p in CI_VALUES]
GATEWAY = f"{FULLNAME}-gateway"
AGGREGATOR = f"{FULLNAME}-aggregator"


def _objects(values: Any) -> list[Obj]:
    return render([values] if values else [])


@pytest.mark.parametrize("values", SCENARIOS)
def test_every_pod_and_container_is_hardened(values: Any) -> None:
    specs = list(pod_specs(_objects(values)))
    assert any(name.startswith("SparkApplication") for name, _ in specs)
    for name, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod.get("runAsUser", 1) != 0, name
        for container in spec["containers"] + spec.get("initContainers", []):
            where = f"{name}/{container['name']}"
            sc = container["securityContext"]
            assert sc["runAsNonRoot"] is True, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc.get("privileged", False) is False, where
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert not sc["capabilities"].get("add"), where


@pytest.mark.parametrize("values", SCENARIOS)
def test_only_the_spark_driver_gets_an_api_token(values: Any) -> None:
    for name, spec in pod_specs(_objects(values)):
        if name.startswith("SparkApplication"):
            continue  # the driver manages its executors through the API server
        assert spec["automountServiceAccountToken"] is False, name


def test_writable_paths_are_volumes(default_objects: list[Obj]) -> None:
    """Read-only root filesystems: whatever a process writes goes to a mounted volume."""
    expected = {
        f"Deployment/{GATEWAY}": {"/tmp"},
        f"StatefulSet/{FULLNAME}-redis": {"/data", "/tmp", "/etc/redis"},
        f"SparkApplication/{AGGREGATOR}/driver": {"/tmp", "/opt/spark/work-dir", "/var/lib/sparkwire/checkpoint"},
        f"SparkApplication/{AGGREGATOR}/executor": {"/tmp", "/opt/spark/work-dir", "/var/lib/sparkwire/checkpoint"},
    }
    for name, spec in pod_specs(default_objects):
        mounts = {m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
        assert mounts == expected[name], name
        declared = {v["name"] for v in spec.get("volumes", [])}
        claims = {"data"} if name.startswith("StatefulSet") else set()
        assert {m["name"] for c in spec["containers"] for m in c["volumeMounts"]} <= declared | claims, name


def _gateway(objects: list[Obj]) -> tuple[Obj, Obj]:
    spec = find(objects, "Deployment")["spec"]["template"]["spec"]
    return spec, spec["containers"][0]


def test_gateway_probes(default_objects: list[Obj]) -> None:
    _, container = _gateway(default_objects)
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}


@pytest.mark.parametrize("kube_version", ["1.33", MIN_KUBE_VERSION])
def test_gateway_drains_within_its_grace_period(kube_version: str) -> None:
    spec, container = _gateway(render(kube_version=kube_version))
    pre_stop = container["lifecycle"]["preStop"]
    if kube_version == MIN_KUBE_VERSION:
        assert pre_stop == {"exec": {"command": ["sleep", "5"]}}, "the sleep action needs Kubernetes 1.30"
        sleep = 5
    else:
        sleep = pre_stop["sleep"]["seconds"]
    drain = int(env_of(container)["SPARKWIRE_DRAIN_MS"]["value"]) // 1000
    assert sleep > 0 and drain > 0
    # After the preStop sleep: up to `drain` for clients to leave, then uvicorn's graceful shutdown (as long).
    assert spec["terminationGracePeriodSeconds"] > sleep + 2 * drain


def test_gateway_rolls_out_without_losing_capacity(default_objects: list[Obj]) -> None:
    deployment = find(default_objects, "Deployment")
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert all(c["whenUnsatisfiable"] == "ScheduleAnyway" for c in spread)
    resources = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] and resources["limits"]["memory"]


def test_redis_is_durable(default_objects: list[Obj]) -> None:
    conf = find(default_objects, "ConfigMap", f"{FULLNAME}-redis")["data"]["redis.conf"].splitlines()
    for line in ("appendonly yes", "appendfsync always", "maxmemory-policy noeviction", "dir /data"):
        assert line in conf, line
    statefulset = find(default_objects, "StatefulSet", f"{FULLNAME}-redis")
    claim = statefulset["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "data" and claim["spec"]["resources"]["requests"]["storage"] == "8Gi"
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    assert container["image"] == "redis:7.4.6"
    assert container["args"] == ["/etc/redis/redis.conf", "--requirepass", "$(REDIS_PASSWORD)"]
    assert container["securityContext"]["runAsUser"] == 999
    assert statefulset["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 999
    env = env_of(container)
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == f"{FULLNAME}-redis"
    assert env["REDISCLI_AUTH"] == {**env["REDIS_PASSWORD"], "name": "REDISCLI_AUTH"}
    assert statefulset["spec"]["serviceName"] == f"{FULLNAME}-redis-headless"
    assert find(default_objects, "Service", f"{FULLNAME}-redis-headless")["spec"]["clusterIP"] == "None"


def _app(objects: list[Obj]) -> Obj:
    return find(objects, "SparkApplication")


def test_spark_application(default_objects: list[Obj]) -> None:
    app = _app(default_objects)
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    spec = app["spec"]
    assert (spec["type"], spec["mode"], spec["sparkVersion"]) == ("Python", "cluster", "4.2.0")
    assert spec["mainApplicationFile"] == "local:///opt/sparkwire/aggregate.py"
    assert spec["restartPolicy"] == {"type": "Always", "onFailureRetryInterval": 10,
                                     "onSubmissionFailureRetryInterval": 20}
    assert "arguments" not in spec and "deps" not in spec, "configured through SPARKWIRE_* only"
    # The operator tells Spark to take these container names from the pod templates.
    assert [c["name"] for c in spec["driver"]["template"]["spec"]["containers"]] == ["spark-kubernetes-driver"]
    assert [c["name"] for c in spec["executor"]["template"]["spec"]["containers"]] == ["spark-kubernetes-executor"]
    env = env_of(spec["driver"]["template"]["spec"]["containers"][0])
    assert "SPARKWIRE_SPARK_JARS" not in env and env["SPARKWIRE_MASTER"]["value"] == ""
    assert spec["executor"]["instances"] == 1
    assert spec["driver"]["serviceAccount"] == AGGREGATOR
    assert spec["driver"]["javaOptions"] == QUICK_JIT  # what `sparkwire aggregate` gives a local driver


def test_driver_java_options_are_the_values_and_left_out_when_empty() -> None:
    own = _app(render(sets={"aggregator.driver.javaOptions": "-XX:+UseSerialGC"}))["spec"]["driver"]
    assert own["javaOptions"] == "-XX:+UseSerialGC"
    assert "javaOptions" not in _app(render(sets={"aggregator.driver.javaOptions": ""}))["spec"]["driver"]


def test_checkpoint_on_a_pvc_shared_with_executors_on_the_drivers_node(default_objects: list[Obj]) -> None:
    app = _app(default_objects)["spec"]
    path = env_of(app["driver"]["template"]["spec"]["containers"][0])["SPARKWIRE_CHECKPOINT"]["value"]
    for role in ("driver", "executor"):
        pod = app[role]["template"]["spec"]
        assert {"name": "checkpoint", "mountPath": path} in pod["containers"][0]["volumeMounts"]
        volume = next(v for v in pod["volumes"] if v["name"] == "checkpoint")
        assert volume["persistentVolumeClaim"]["claimName"] == f"{AGGREGATOR}-checkpoint"
    claim = find(default_objects, "PersistentVolumeClaim", f"{AGGREGATOR}-checkpoint")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    affinity = app["executor"]["template"]["spec"]["affinity"]["podAffinity"]
    term = affinity["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"spark-role": "driver",
                                                    "sparkoperator.k8s.io/app-name": AGGREGATOR}


def test_driver_metrics_service_selects_the_driver(default_objects: list[Obj]) -> None:
    app = _app(default_objects)
    service = find(default_objects, "Service", f"{AGGREGATOR}-metrics")
    assert service["spec"]["selector"] == {"spark-role": "driver",
                                           "sparkoperator.k8s.io/app-name": app["metadata"]["name"]}
    container = app["spec"]["driver"]["template"]["spec"]["containers"][0]
    port = int(env_of(container)["SPARKWIRE_METRICS_PORT"]["value"])
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert service["spec"]["ports"][0]["targetPort"] == port


def test_driver_rbac(default_objects: list[Obj]) -> None:
    role = find(default_objects, "Role", AGGREGATOR)
    granted = {(res, verb) for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]}
    for resource in ("pods", "services", "configmaps", "persistentvolumeclaims"):
        for verb in ("create", "get", "list", "watch", "delete"):
            assert (resource, verb) in granted, (resource, verb)
    assert all(rule["apiGroups"] == [""] for rule in role["rules"]), "core group only"
    binding = find(default_objects, "RoleBinding", AGGREGATOR)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": AGGREGATOR,
                                    "namespace": default_objects[0]["metadata"]["namespace"]}]
    assert binding["roleRef"]["name"] == AGGREGATOR


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_network_paths() -> None:
    objects = render([CHART / "ci" / "kind-values.yaml"])
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    gateway_pod = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    redis_pod = find(objects, "StatefulSet", f"{FULLNAME}-redis")["spec"]["template"]["metadata"]["labels"]
    kafka_pod = find(objects, "StatefulSet", f"{FULLNAME}-kafka")["spec"]["template"]["metadata"]["labels"]
    app = _app(objects)["spec"]
    # Pod labels Spark and the operator put on the driver and the executors.
    spark_common = {"sparkoperator.k8s.io/app-name": AGGREGATOR, **app["driver"]["labels"]}
    driver_pod = {**spark_common, "spark-role": "driver"}
    executor_pod = {**spark_common, "spark-role": "executor"}

    def allowed_into(policy: str, labels: dict[str, str]) -> bool:
        return any(_selects(peer["podSelector"]["matchLabels"], labels)
                   for rule in policies[policy]["ingress"] for peer in rule.get("from", []))

    redis = policies[f"{FULLNAME}-redis"]
    assert _selects(redis["podSelector"]["matchLabels"], redis_pod)
    assert allowed_into(f"{FULLNAME}-redis", gateway_pod) and allowed_into(f"{FULLNAME}-redis", driver_pod)
    assert not allowed_into(f"{FULLNAME}-redis", executor_pod) and not allowed_into(f"{FULLNAME}-redis", kafka_pod)
    assert redis["egress"] == []
    # The gateway takes traffic from anywhere, on its one port.
    assert policies[GATEWAY]["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]
    # Spark pods reach each other; Kafka only from Spark pods, labelled clients and itself.
    assert allowed_into(AGGREGATOR, driver_pod) and allowed_into(AGGREGATOR, executor_pod)
    assert not allowed_into(AGGREGATOR, gateway_pod)
    kafka = f"{FULLNAME}-kafka"
    assert allowed_into(kafka, executor_pod) and allowed_into(kafka, {"sparkwire.io/kafka-client": "true"})
    assert not allowed_into(kafka, gateway_pod)
    # The driver (only) may call the API server and Redis.
    driver_policy = policies[f"{AGGREGATOR}-driver"]
    assert _selects(driver_policy["podSelector"]["matchLabels"], driver_pod)
    assert not _selects(driver_policy["podSelector"]["matchLabels"], executor_pod)
    ports = {p["port"] for rule in driver_policy["egress"] for p in rule.get("ports", [])}
    assert {443, 6443, 6379} <= ports
    # Every policy lets its pods resolve names, except Redis, which calls nobody.
    for name, policy in policies.items():
        if name == f"{FULLNAME}-redis" or name == f"{AGGREGATOR}-driver":
            continue
        assert {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]} in policy["egress"], name
