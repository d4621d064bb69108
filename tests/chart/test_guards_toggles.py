"""Values the chart refuses (with a message that says what to change), and switches that add or remove
objects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import CHART, FULLNAME, NAMESPACE, env_of, find, has, kinds, render, render_error

GATEWAY = f"{FULLNAME}-gateway"
REDIS = f"{FULLNAME}-redis"
AGGREGATOR = f"{FULLNAME}-aggregator"
KAFKA = f"{FULLNAME}-kafka"


@pytest.mark.parametrize(("sets", "message"), [
    pytest.param({"gateway.replicaCount": 1}, "gateway.podDisruptionBudget.enabled needs gateway.replicaCount >= 2",
                 id="pdb-with-one-replica"),
    pytest.param({"gateway.autoscaling.enabled": True, "gateway.autoscaling.minReplicas": 1},
                 "needs gateway.autoscaling.minReplicas >= 2", id="pdb-with-hpa-min-1"),
    pytest.param({"gateway.autoscaling.enabled": True, "gateway.autoscaling.minReplicas": 5,
                  "gateway.autoscaling.maxReplicas": 3}, "must not exceed gateway.autoscaling.maxReplicas",
                 id="hpa-min-above-max"),
    pytest.param({"gateway.terminationGracePeriodSeconds": 25},
                 "gateway.terminationGracePeriodSeconds (25) must exceed preStopSleepSeconds + 2 * "
                 "config.drainSeconds (25)",
                 id="grace-not-above-prestop-plus-drain"),
    pytest.param({"gateway.config.drainSeconds": 30}, "must exceed preStopSleepSeconds + 2 * config.drainSeconds (65)",
                 id="drain-raised-without-grace"),
    pytest.param({"redis.external.url": "redis://redis.example:6379/0"},
                 "redis.external is set but redis.enabled is true", id="external-redis-and-deploy"),
    pytest.param({"redis.external.existingSecret": "their-redis"},
                 "redis.external is set but redis.enabled is true", id="external-secret-and-deploy"),
    pytest.param({"redis.enabled": False}, "set redis.external.url or redis.external.existingSecret",
                 id="no-redis-at-all"),
    pytest.param({"redis.enabled": False, "redis.external.url": "redis://a:6379/0",
                  "redis.external.existingSecret": "s"}, "set only one of redis.external.url",
                 id="two-external-urls"),
    pytest.param({"redis.enabled": False, "redis.external.url": "http://redis:6379"},
                 "must start with redis://, rediss:// or redis+sentinel://", id="external-url-scheme"),
    pytest.param({"gateway.auth.secret": "x" * 40, "gateway.auth.existingSecret": "jwt"},
                 "set only one of gateway.auth.secret and gateway.auth.existingSecret", id="two-auth-secrets"),
    pytest.param({"kafka.bootstrapServers": ""}, "set kafka.bootstrapServers to your Kafka", id="no-kafka"),
    pytest.param({"redis.replication.enabled": True, "redis.external.url": "redis://redis.example:6379/0"},
                 "redis.replication.enabled (the chart runs a replicated Redis) and redis.external (use an existing "
                 "Redis) exclude each other", id="replicated-and-external-redis"),
    pytest.param({"redis.replication.enabled": True, "redis.enabled": False,
                  "redis.external.url": "redis+sentinel://s:26379/m/0"},
                 "redis.replication.enabled (the chart runs a replicated Redis) and redis.external",
                 id="replicated-external-without-deploy"),
    pytest.param({"redis.replication.enabled": True, "redis.enabled": False},
                 "redis.replication.enabled replicates the chart's own Redis, but redis.enabled is false",
                 id="replicated-without-redis"),
    pytest.param({"redis.replication.enabled": True, "redis.replication.sentinel.quorum": 4},
                 "redis.replication.sentinel.quorum is 4 but there are 3 Sentinels", id="quorum-above-sentinels"),
    pytest.param({"redis.replication.enabled": True, "redis.replication.replicas": 3,
                  "redis.replication.sentinel.quorum": 5},
                 "redis.replication.sentinel.quorum is 5 but there are 4 Sentinels", id="quorum-above-sentinels-4"),
    pytest.param({"redis.replication.enabled": True, "redis.replication.replicas": 1},
                 "/redis/replication/replicas", id="schema-one-replica"),
    pytest.param({"redis.replication.enabled": True, "redis.replication.sentinel.quorum": 0},
                 "/redis/replication/sentinel/quorum", id="schema-quorum-0"),
    pytest.param({"redis.replication.enabled": True, "redis.replication.sentinel.downAfterMilliseconds": 20000},
                 "failoverTimeoutMilliseconds must exceed downAfterMilliseconds", id="failover-timeout-too-short"),
    pytest.param({"redis.replication.masterName": "my master"}, "/redis/replication/masterName",
                 id="schema-master-name"),
    pytest.param({"redis.replication.sentinels": 3}, "additional properties 'sentinels' not allowed",
                 id="schema-replication-unknown-key"),
    pytest.param({"kafka.deploy.enabled": True, "kafka.deploy.replicas": 2}, "/kafka/deploy/replicas",
                 id="schema-kafka-even-brokers"),
    pytest.param({"kafka.deploy.enabled": True, "kafka.deploy.replicas": 0}, "/kafka/deploy/replicas",
                 id="schema-kafka-no-broker"),
    pytest.param({"kafka.deploy.replicas": 3}, "kafka.deploy.replicas is set but kafka.deploy.enabled is false",
                 id="kafka-brokers-without-deploy"),
    pytest.param({"gateway.replicas": 3}, "additional properties 'replicas' not allowed", id="schema-unknown-key"),
    pytest.param({"stream": "bad stream!"}, "/stream", id="schema-stream-name"),
    pytest.param({"aggregator.checkpoint.accessMode": "ReadWriteOncePod"}, "/aggregator/checkpoint/accessMode",
                 id="schema-checkpoint-rwop"),
    pytest.param({"redis.image.tag": ""}, "/redis/image/tag", id="schema-redis-tag-pinned"),
])
def test_refused_values_say_what_to_change(sets: dict[str, Any], message: str) -> None:
    assert message in render_error(sets=sets)


@pytest.mark.parametrize(("sets", "message"), [
    ({"redis.replication.enabled": True, "redis.replication.replicas": 1},
     "redis.replication.replicas is 1: at least 2"),
    ({"kafka.deploy.enabled": True, "kafka.deploy.replicas": 4},
     "kafka.deploy.replicas is 4: use 1, or an odd number of brokers >= 3"),
    ({"redis.replication.enabled": True, "redis.replication.masterName": "a/b"},
     "redis.replication.masterName must be 1-64 of"),
])
def test_guards_hold_without_the_schema(sets: dict[str, Any], message: str) -> None:
    """`helm install --skip-schema-validation` still refuses them (validate.yaml)."""
    import subprocess

    from .conftest import RELEASE, tool

    command = [str(tool("helm")), "template", RELEASE, str(CHART), "--skip-schema-validation"]
    for key, value in sets.items():
        command += ["--set-json", f"{key}={json.dumps(value)}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_one_replica_renders_without_the_pdb() -> None:
    objects = render(sets={"gateway.replicaCount": 1, "gateway.podDisruptionBudget.enabled": False})
    assert find(objects, "Deployment")["spec"]["replicas"] == 1
    assert not has(objects, "PodDisruptionBudget")


def test_defaults(default_objects: list[dict[str, Any]]) -> None:
    found = kinds(default_objects)
    assert found["Deployment"] == [GATEWAY]
    assert found["StatefulSet"] == [REDIS]
    assert found["SparkApplication"] == [AGGREGATOR]
    assert found["PodDisruptionBudget"] == [GATEWAY]
    assert find(default_objects, "Deployment")["spec"]["replicas"] == 3
    for absent in ("Ingress", "HorizontalPodAutoscaler", "ServiceMonitor", "PrometheusRule", "Job"):
        assert absent not in found, absent
    assert KAFKA not in found.get("StatefulSet", [])


def test_gateway_service_port_80_to_http_8080(default_objects: list[dict[str, Any]]) -> None:
    service = find(default_objects, "Service", GATEWAY)
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    assert "sessionAffinity" not in service["spec"]
    container = find(default_objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_service_monitors_toggle() -> None:
    on = render(sets={"observability.serviceMonitor.enabled": True})
    monitors = {o["metadata"]["name"]: o for o in on if o["kind"] == "ServiceMonitor"}
    assert set(monitors) == {GATEWAY, AGGREGATOR}
    assert monitors[GATEWAY]["spec"]["endpoints"][0]["port"] == "http"
    assert monitors[AGGREGATOR]["spec"]["endpoints"][0]["port"] == "metrics"
    # Each selects exactly the Service it is meant for.
    for name, service in ((GATEWAY, GATEWAY), (AGGREGATOR, f"{AGGREGATOR}-metrics")):
        selector = monitors[name]["spec"]["selector"]["matchLabels"]
        matching = [o["metadata"]["name"] for o in on if o["kind"] == "Service"
                    and selector.items() <= o["metadata"]["labels"].items()]
        assert matching == [service]
    without_aggregator = render(sets={"observability.serviceMonitor.enabled": True, "aggregator.enabled": False})
    assert kinds(without_aggregator)["ServiceMonitor"] == [GATEWAY]


def test_prometheus_rule_toggle() -> None:
    objects = render(sets={"observability.prometheusRule.enabled": True})
    rule = find(objects, "PrometheusRule")
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {"SparkwireClientsReportDuplicates", "SparkwireClientsReportGaps", "SparkwireGatewayGapDetected",
            "SparkwireSnapshotResetsSpiking", "SparkwireGatewayLagging", "SparkwireGatewayRedisErrors",
            "SparkwireAggregatorDown"} <= alerts
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            assert f'namespace="{NAMESPACE}"' in r["expr"], r["alert"]
            assert r["labels"]["severity"] in ("critical", "warning", "info")
    without_aggregator = render(sets={"observability.prometheusRule.enabled": True, "aggregator.enabled": False})
    rule = find(without_aggregator, "PrometheusRule")
    assert "aggregator-metrics" not in json.dumps(rule)


def test_grafana_dashboard_configmap(default_objects: list[dict[str, Any]]) -> None:
    configmap = find(default_objects, "ConfigMap", f"{FULLNAME}-dashboards")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"]["sparkwire.json"].strip() == (CHART / "dashboards" / "sparkwire.json").read_text().strip()
    assert json.loads(configmap["data"]["sparkwire.json"])["uid"] == "sparkwire-overview"
    off = render(sets={"observability.grafanaDashboard.enabled": False})
    assert not has(off, "ConfigMap", f"{FULLNAME}-dashboards")


def test_ingress_for_websockets() -> None:
    objects = render([CHART / "ci" / "auth-ingress-values.yaml"])
    ingress = find(objects, "Ingress", GATEWAY)
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "3600"
    assert annotations["nginx.ingress.kubernetes.io/proxy-send-timeout"] == "3600"
    assert annotations["nginx.ingress.kubernetes.io/limit-connections"] == "50"  # user annotations merged in
    assert not [k for k in annotations if "affinity" in k or "session-cookie" in k], "no sticky sessions"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "ws.example.com"
    paths = {p["path"]: p for p in rule["http"]["paths"]}
    assert "/ws" in paths and not {"/metrics", "/healthz", "/readyz"} & set(paths)
    assert all(p["backend"]["service"] == {"name": GATEWAY, "port": {"name": "http"}} for p in paths.values())
    assert paths["/"]["pathType"] == "Exact", "a Prefix / would expose /metrics"
    assert not has(render(), "Ingress")


def test_server_sent_events_get_an_ingress_and_service_of_their_own_that_keep_a_client_on_one_pod() -> None:
    objects = render([CHART / "ci" / "auth-ingress-values.yaml"])
    ingress = find(objects, "Ingress", f"{GATEWAY}-sse")
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == "$http_x_sparkwire_affinity"
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert annotations["nginx.ingress.kubernetes.io/limit-connections"] == "50"  # user annotations merged in
    [rule] = ingress["spec"]["rules"]
    assert rule["host"] == "ws.example.com"
    assert ingress["spec"]["tls"] == find(objects, "Ingress", GATEWAY)["spec"]["tls"]
    assert [(p["path"], p["pathType"], p["backend"]["service"]["name"]) for p in rule["http"]["paths"]] == [
        ("/sse", "Prefix", f"{GATEWAY}-sse")]
    service = find(objects, "Service", f"{GATEWAY}-sse")
    assert service["spec"]["selector"] == find(objects, "Service", GATEWAY)["spec"]["selector"]
    assert "sessionAffinity" not in service["spec"], "kept on a pod by the ingress, not by kube-proxy"
    main = find(objects, "Ingress", GATEWAY)
    assert "/sse" not in {p["path"] for p in main["spec"]["rules"][0]["http"]["paths"]}
    assert not [k for k in main["metadata"]["annotations"] if "hash" in k], "WebSockets stay unsticky"

    traefik = render([CHART / "ci" / "auth-ingress-values.yaml"], sets={"gateway.ingress.className": "traefik"})
    sticky = find(traefik, "Service", f"{GATEWAY}-sse")["metadata"]["annotations"]
    assert sticky["traefik.ingress.kubernetes.io/service.sticky.cookie"] == "true"
    assert sticky["traefik.ingress.kubernetes.io/service.sticky.cookie.name"] == "sparkwire_sse"
    assert not [k for k in find(traefik, "Ingress", f"{GATEWAY}-sse")["metadata"].get("annotations", {})
                if k.startswith("nginx.") and k != "nginx.ingress.kubernetes.io/limit-connections"]
    assert "annotations" not in find(traefik, "Service", GATEWAY)["metadata"]

    off = render([CHART / "ci" / "auth-ingress-values.yaml"], sets={"gateway.ingress.sse.enabled": False})
    assert not has(off, "Ingress", f"{GATEWAY}-sse") and not has(off, "Service", f"{GATEWAY}-sse")
    assert has(off, "Ingress", GATEWAY)


def test_hpa_replaces_the_static_replica_count() -> None:
    objects = render([CHART / "ci" / "hpa-pdb-values.yaml"])
    hpa = find(objects, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": GATEWAY}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] >= 60
    assert "replicas" not in find(objects, "Deployment")["spec"]
    assert find(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_network_policies_toggle() -> None:
    on = kinds(render([CHART / "ci" / "kind-values.yaml"]))["NetworkPolicy"]
    assert sorted(on) == sorted([GATEWAY, REDIS, AGGREGATOR, f"{AGGREGATOR}-driver", KAFKA, f"{KAFKA}-topics",
                                 f"{FULLNAME}-test-gateway-ready"])
    assert "NetworkPolicy" not in kinds(render(sets={"networkPolicy.enabled": False}))


def test_in_chart_kafka() -> None:
    objects = render([CHART / "ci" / "kind-values.yaml"])
    broker = find(objects, "StatefulSet", KAFKA)
    container = broker["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "apache/kafka:4.1.1"
    assert broker["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    properties = find(objects, "ConfigMap", KAFKA)["data"]["server.properties"]
    bootstrap = f"{KAFKA}.{NAMESPACE}.svc:9092"
    assert f"advertised.listeners=PLAINTEXT://{bootstrap}" in properties
    assert "process.roles=broker,controller" in properties
    driver_env = env_of(find(objects, "SparkApplication")["spec"]["driver"]["template"]["spec"]["containers"][0])
    assert driver_env["SPARKWIRE_BOOTSTRAP_SERVERS"]["value"] == bootstrap
    job = find(objects, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert '"metrics-raw"' in script and '"metrics-deadletter"' in script and bootstrap in script
    default_env = env_of(find(render(), "SparkApplication")["spec"]["driver"]["template"]["spec"]["containers"][0])
    assert default_env["SPARKWIRE_BOOTSTRAP_SERVERS"]["value"] == "kafka:9092"


def test_external_redis_replaces_the_statefulset() -> None:
    objects = render([CHART / "ci" / "external-redis-values.yaml"])
    assert not [o for o in objects if o["metadata"]["labels"].get("app.kubernetes.io/component") == "redis"
                and o["metadata"]["name"] != f"{REDIS}-external"]
    secret = find(objects, "Secret", f"{REDIS}-external")
    assert "redis-url" in secret["data"]
    for container in (find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0],
                      find(objects, "SparkApplication")["spec"]["driver"]["template"]["spec"]["containers"][0]):
        env = env_of(container)
        assert env["SPARKWIRE_REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": f"{REDIS}-external", "key": "redis-url"}
        assert "REDIS_PASSWORD" not in env
    gateway_policy = find(objects, "NetworkPolicy", GATEWAY)
    assert {"ports": [{"port": 6379, "protocol": "TCP"}]} in gateway_policy["spec"]["egress"]


def test_existing_secrets_and_claim() -> None:
    objects = render([CHART / "ci" / "existing-secrets-values.yaml"])
    assert not has(objects, "Secret") and not has(objects, "PersistentVolumeClaim")
    assert not has(objects, "Role") and not has(objects, "ServiceAccount", AGGREGATOR)
    gateway_env = env_of(find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    assert gateway_env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "sparkwire-redis-credentials", "key": "password"}
    assert gateway_env["SPARKWIRE_AUTH_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": "sparkwire-jwt",
                                                                                  "key": "hs256-secret"}
    app = find(objects, "SparkApplication")
    assert app["spec"]["driver"]["serviceAccount"] == "spark"
    for role in ("driver", "executor"):
        volumes = {v["name"]: v for v in app["spec"][role]["template"]["spec"]["volumes"]}
        assert volumes["checkpoint"]["persistentVolumeClaim"]["claimName"] == "sparkwire-checkpoint-rwx"
    assert "affinity" not in app["spec"]["executor"]["template"]["spec"], "ReadWriteMany: executors anywhere"
    assert app["spec"]["imagePullSecrets"] == ["registry-credentials"]
    for workload in (find(objects, "Deployment"), find(objects, "StatefulSet")):
        assert workload["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "registry-credentials"}]


def test_aggregator_toggle() -> None:
    objects = render(sets={"aggregator.enabled": False})
    assert not [o for o in objects if o["metadata"]["labels"].get("app.kubernetes.io/component") == "aggregator"]
    assert has(objects, "Deployment", GATEWAY)


def test_auth_secret_is_a_secret_and_rolls_the_pods() -> None:
    objects = render([CHART / "ci" / "auth-ingress-values.yaml"])
    deployment = find(objects, "Deployment")
    env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
    assert env["SPARKWIRE_AUTH_SECRET"]["valueFrom"]["secretKeyRef"] == {
        "name": f"{GATEWAY}-auth", "key": "auth-secret"}
    assert env["SPARKWIRE_ALLOWED_ORIGINS"]["value"] == "https://app.example.com"
    assert "change-me" not in json.dumps(deployment), "the secret stays out of the pod spec"
    assert "checksum/auth-secret" in deployment["spec"]["template"]["metadata"]["annotations"]
    assert has(objects, "Secret", f"{GATEWAY}-auth")


@pytest.mark.parametrize(("sets", "gateway", "aggregator"), [
    ({}, "sparkwire/gateway:0.1.0", "sparkwire/aggregator:0.1.0"),
    ({"gateway.image.repository": "registry.example/sw/gw", "gateway.image.tag": "1.2.3",
      "aggregator.image.repository": "registry.example/sw/agg", "aggregator.image.tag": "4.5.6"},
     "registry.example/sw/gw:1.2.3", "registry.example/sw/agg:4.5.6"),
    # what skaffold sets: <tag>@<digest>
    ({"gateway.image.repository": "sparkwire-gateway", "gateway.image.tag": "abc123@sha256:" + "0" * 64,
      "aggregator.image.repository": "sparkwire-aggregator", "aggregator.image.tag": "def456"},
     "sparkwire-gateway:abc123@sha256:" + "0" * 64, "sparkwire-aggregator:def456"),
])
def test_images(sets: dict[str, Any], gateway: str, aggregator: str) -> None:
    objects = render(sets={**sets, "gateway.image.pullPolicy": "Never"})
    deployment = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert (deployment["image"], deployment["imagePullPolicy"]) == (gateway, "Never")
    assert find(objects, "SparkApplication")["spec"]["image"] == aggregator


def test_names_and_labels(default_objects: list[dict[str, Any]]) -> None:
    for obj in default_objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "sparkwire", obj["metadata"]["name"]
        assert labels["app.kubernetes.io/instance"] == "sw"
        assert obj["metadata"]["namespace"] == NAMESPACE
        assert obj["metadata"]["name"].startswith(FULLNAME)
    for kind, name, component in (("Deployment", GATEWAY, "gateway"), ("StatefulSet", REDIS, "redis"),
                                  ("SparkApplication", AGGREGATOR, "aggregator")):
        assert find(default_objects, kind, name)["metadata"]["labels"]["app.kubernetes.io/component"] == component
    kafka = find(render([CHART / "ci" / "kind-values.yaml"]), "StatefulSet", KAFKA)
    assert kafka["metadata"]["labels"]["app.kubernetes.io/component"] == "kafka"
    # A release named like the chart is not doubled (skaffold installs release `sparkwire`).
    assert "sparkwire-gateway" in {o["metadata"]["name"] for o in _render_release("sparkwire")}


def _render_release(release: str) -> list[dict[str, Any]]:
    import subprocess

    import yaml

    from .conftest import tool

    out = subprocess.run([str(tool("helm")), "template", release, str(CHART)], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]
