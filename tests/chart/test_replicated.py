"""Replicated state (issue 18), as rendered: the chart's Redis as 1 primary + replicas with a Sentinel in every
pod (redis.replication), and the in-chart Kafka as 3 brokers (kafka.deploy.replicas). The URLs and the
replicas setting every component gets, the pods, their start scripts and settings, Services, PDBs,
anti-affinity, NetworkPolicies, the Kafka quorum and replication factors. The scripts' behaviour against
real processes is in test_redis_replicated_scripts.py; helm lint, kubectl-validate and kube-score run on
ci/replicated-values.yaml with every other scenario (test_lint_validate.py, test_kube_score.py)."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sparkwire.replaylog.redis_url import parse_sentinel_url

from .conftest import CHART, CI_VALUES, FULLNAME, NAMESPACE, Obj, env_of, find, has, render

REPLICATED = CHART / "ci" / "replicated-values.yaml"
REDIS = f"{FULLNAME}-redis"
KAFKA = f"{FULLNAME}-kafka"
AGGREGATOR = f"{FULLNAME}-aggregator"
SENTINEL_SVC = f"{REDIS}-sentinel.{NAMESPACE}.svc"
NODES = [f"{REDIS}-{i}.{REDIS}-headless.{NAMESPACE}.svc" for i in range(3)]


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    return render([REPLICATED])


def _containers(objects: list[Obj]) -> dict[str, Obj]:
    """The containers that talk to Redis: gateway, the aggregator's driver, the orders job's driver."""
    gateway = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    out = {"gateway": gateway}
    for name in (AGGREGATOR, f"{FULLNAME}-job-orders"):
        app = find(objects, "SparkApplication", name)
        out[name] = app["spec"]["driver"]["template"]["spec"]["containers"][0]
    return out


def _statefulset(objects: list[Obj], name: str) -> Obj:
    return find(objects, "StatefulSet", name)


def _pod_containers(objects: list[Obj], name: str) -> dict[str, Obj]:
    return {c["name"]: c for c in _statefulset(objects, name)["spec"]["template"]["spec"]["containers"]}


def test_the_new_ci_values_file_is_a_scenario() -> None:
    assert REPLICATED in CI_VALUES


# -- what every component gets ----------------------------------------------------------------------------


def test_every_component_gets_the_sentinel_url_and_one_replica(objects: list[Obj]) -> None:
    password = "Zx81QwErTy0123456789abcdefABCDEF"
    for where, container in _containers(objects).items():
        env = env_of(container)
        names = [e["name"] for e in container["env"]]
        assert names.index("REDIS_PASSWORD") < names.index("SPARKWIRE_REDIS_URL"), where
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": REDIS, "key": "redis-password"}
        url = env["SPARKWIRE_REDIS_URL"]["value"]
        assert url == f"redis+sentinel://:$(REDIS_PASSWORD)@{SENTINEL_SVC}:26379/sparkwire/0", where
        address = parse_sentinel_url(url.replace("$(REDIS_PASSWORD)", password))
        assert (address.sentinels, address.master_name, address.db, address.password) == (
            ((SENTINEL_SVC, 26379),), "sparkwire", 0, password), where
        if where == "gateway":
            assert "SPARKWIRE_REDIS_REPLICAS" not in env, "the gateway does not write"
        else:
            assert env["SPARKWIRE_REDIS_REPLICAS"]["value"] == "1", where


def test_without_a_password_the_url_has_none() -> None:
    objects = render([REPLICATED], {"redis.auth.enabled": False})
    for where, container in _containers(objects).items():
        env = env_of(container)
        assert "REDIS_PASSWORD" not in env, where
        assert env["SPARKWIRE_REDIS_URL"]["value"] == f"redis+sentinel://{SENTINEL_SVC}:26379/sparkwire/0"
    spec = _statefulset(objects, REDIS)["spec"]["template"]["spec"]
    assert all("REDIS_PASSWORD" not in env_of(c) for c in spec["containers"])


def test_the_master_name_is_the_urls_and_the_sentinels() -> None:
    objects = render([REPLICATED], {"redis.replication.masterName": "replay-log"})
    url = env_of(_containers(objects)["gateway"])["SPARKWIRE_REDIS_URL"]["value"]
    assert parse_sentinel_url(url).master_name == "replay-log"
    for container in _pod_containers(objects, REDIS).values():
        assert env_of(container)["MASTER_NAME"]["value"] == "replay-log"


def test_the_single_redis_stays_the_default(default_objects: list[Obj]) -> None:
    env = env_of(_containers(render([CHART / "ci" / "jobs-values.yaml"]))[AGGREGATOR])
    assert env["SPARKWIRE_REDIS_URL"]["value"] == f"redis://:$(REDIS_PASSWORD)@{REDIS}.{NAMESPACE}.svc:6379/0"
    assert env["SPARKWIRE_REDIS_REPLICAS"]["value"] == "0"
    statefulset = _statefulset(default_objects, REDIS)
    assert statefulset["spec"]["replicas"] == 1 and "podManagementPolicy" not in statefulset["spec"]
    assert [c["name"] for c in statefulset["spec"]["template"]["spec"]["containers"]] == ["redis"]
    assert "affinity" not in statefulset["spec"]["template"]["spec"]
    assert has(default_objects, "Service", REDIS) and not has(default_objects, "Service", f"{REDIS}-sentinel")
    assert not has(default_objects, "PodDisruptionBudget", REDIS)
    conf = find(default_objects, "ConfigMap", REDIS)["data"]
    assert set(conf) == {"redis.conf"} and "min-replicas-to-write" not in conf["redis.conf"]


# -- the Redis pods ---------------------------------------------------------------------------------------


def test_one_primary_two_replicas_and_a_sentinel_in_each_pod(objects: list[Obj]) -> None:
    statefulset = _statefulset(objects, REDIS)
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    assert statefulset["spec"]["serviceName"] == f"{REDIS}-headless"
    containers = _pod_containers(objects, REDIS)
    assert set(containers) == {"redis", "sentinel"}
    redis_c, sentinel = containers["redis"], containers["sentinel"]
    assert redis_c["command"] == ["sh", "/etc/redis/start-redis.sh"] and "args" not in redis_c
    assert sentinel["command"] == ["sh", "/etc/redis/start-sentinel.sh"]
    assert redis_c["image"] == sentinel["image"] == "redis:7.4.6", "the same Redis image runs the Sentinel"
    assert sentinel["ports"] == [{"name": "sentinel", "containerPort": 26379, "protocol": "TCP"}]
    for container in (redis_c, sentinel):
        env = env_of(container)
        assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        # Every pod's stable DNS name through the headless Service, in ordinal order.
        assert env["REDIS_NODES"]["value"].split() == NODES
        assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
        assert {"name": "config", "mountPath": "/etc/redis", "readOnly": True} in container["volumeMounts"]
    assert env_of(redis_c)["REDISCLI_AUTH"]["valueFrom"]["secretKeyRef"]["name"] == REDIS
    assert "REDISCLI_AUTH" not in env_of(sentinel), "the Sentinels take no password"
    settings = {name: env_of(sentinel)[name]["value"] for name in
                ("QUORUM", "DOWN_AFTER_MS", "FAILOVER_TIMEOUT_MS", "PARALLEL_SYNCS", "SENTINEL_DIR")}
    assert settings == {"QUORUM": "2", "DOWN_AFTER_MS": "5000", "FAILOVER_TIMEOUT_MS": "10000",
                        "PARALLEL_SYNCS": "2", "SENTINEL_DIR": "/data/sentinel"}
    assert sentinel["resources"]["requests"]["cpu"] and sentinel["resources"]["limits"]["memory"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert "26379" in " ".join(sentinel[probe]["exec"]["command"]), probe


@pytest.mark.parametrize(("replicas", "quorum"), [(2, 2), (4, 3)])
def test_pods_sentinels_and_quorum_follow_the_values(replicas: int, quorum: int) -> None:
    objects = render([REPLICATED], {"redis.replication.replicas": replicas,
                                    "redis.replication.sentinel.quorum": quorum})
    assert _statefulset(objects, REDIS)["spec"]["replicas"] == replicas + 1
    sentinel = _pod_containers(objects, REDIS)["sentinel"]
    assert env_of(sentinel)["QUORUM"]["value"] == str(quorum)
    assert len(env_of(sentinel)["REDIS_NODES"]["value"].split()) == replicas + 1


def test_redis_conf_of_every_node(objects: list[Obj]) -> None:
    conf = find(objects, "ConfigMap", REDIS)["data"]["redis.conf"].splitlines()
    for line in ("appendonly yes", "appendfsync always", "maxmemory-policy noeviction", "min-replicas-to-write 1",
                 "min-replicas-max-lag 5", "repl-diskless-sync-delay 0"):
        assert line in conf, line
    assert not any(line.startswith(("replicaof", "slaveof")) for line in conf), "the start script decides the role"


def test_the_start_scripts_are_the_files_with_their_logic(objects: list[Obj]) -> None:
    data = find(objects, "ConfigMap", REDIS)["data"]
    for name in ("start-redis.sh", "start-sentinel.sh"):
        text = data[name]
        assert text == (CHART / "files" / "redis" / name).read_text(), name
        assert text.startswith(f"#!/bin/sh\n# {name}: "), "a header comment says what it is"
        # Static: no template left in it, everything comes from the environment.
        assert "{{" not in text
    redis_script, sentinel_script = data["start-redis.sh"], data["start-sentinel.sh"]
    # Asks the other pods' Sentinels (not its own), then the data nodes, then pod 0 (first install).
    assert "SENTINEL GET-MASTER-ADDR-BY-NAME" in redis_script and '[ "$node" = "$me" ] ||' in redis_script
    assert "ROLE" in redis_script and "primary=$pod0" in redis_script
    assert '--replicaof "$primary" "$REDIS_PORT"' in redis_script
    assert '--replica-announce-ip "$me"' in redis_script and "--masterauth" in redis_script
    assert "not starting as an empty primary" in redis_script and "exit 1" in redis_script
    for line in ("sentinel resolve-hostnames yes", "sentinel announce-hostnames yes",
                 "sentinel announce-ip $me", "sentinel monitor $MASTER_NAME $primary $REDIS_PORT $QUORUM",
                 "sentinel down-after-milliseconds $MASTER_NAME $DOWN_AFTER_MS",
                 "sentinel auth-pass $MASTER_NAME $REDIS_PASSWORD"):
        assert f'echo "{line}"' in sentinel_script, line
    assert "primary=$recorded" in sentinel_script and "primary=$pod0" in sentinel_script


def test_the_scripts_are_posix_sh() -> None:
    for name in ("start-redis.sh", "start-sentinel.sh"):
        result = subprocess.run(["sh", "-n", str(CHART / "files" / "redis" / name)], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 0, result.stderr


def test_a_config_change_rolls_the_pods() -> None:
    def checksum(sets: dict[str, Any]) -> str:
        statefulset = _statefulset(render([REPLICATED], sets), REDIS)
        return str(statefulset["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum({}) != checksum({"redis.replication.minReplicasMaxLag": 7})


def test_services(objects: list[Obj]) -> None:
    assert not has(objects, "Service", REDIS), "no Service in front of data pods that may be read-only replicas"
    pods = _statefulset(objects, REDIS)["spec"]["template"]["metadata"]["labels"]
    sentinel = find(objects, "Service", f"{REDIS}-sentinel")["spec"]
    assert sentinel["selector"].items() <= pods.items()
    assert sentinel["ports"] == [{"name": "sentinel", "port": 26379, "targetPort": "sentinel", "protocol": "TCP"}]
    headless = find(objects, "Service", f"{REDIS}-headless")["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert {p["port"] for p in headless["ports"]} == {6379, 26379}


# -- disruption and placement -----------------------------------------------------------------------------


def _assert_pdb_selects(objects: list[Obj], name: str) -> None:
    pdb = find(objects, "PodDisruptionBudget", name)
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    pods = _statefulset(objects, name)["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pods.items()


def _assert_preferred_hostname_anti_affinity(objects: list[Obj], name: str) -> None:
    spec = _statefulset(objects, name)["spec"]["template"]["spec"]
    anti = spec["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in anti, "preferred: small clusters still schedule"
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    pods = _statefulset(objects, name)["spec"]["template"]["metadata"]["labels"]
    assert term["labelSelector"]["matchLabels"].items() <= pods.items()


def test_pdbs_and_anti_affinity(objects: list[Obj]) -> None:
    for name in (REDIS, KAFKA):
        _assert_pdb_selects(objects, name)
        _assert_preferred_hostname_anti_affinity(objects, name)


def test_pdb_and_anti_affinity_switches() -> None:
    objects = render([REPLICATED], {"redis.replication.podDisruptionBudget.enabled": False,
                                    "redis.replication.podAntiAffinity": False})
    assert not has(objects, "PodDisruptionBudget", REDIS)
    assert "affinity" not in _statefulset(objects, REDIS)["spec"]["template"]["spec"]
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["redis"]}]}]}}}
    objects = render([REPLICATED], {"redis.affinity": own})
    assert _statefulset(objects, REDIS)["spec"]["template"]["spec"]["affinity"] == own


# -- NetworkPolicies --------------------------------------------------------------------------------------


def _ports(rule: Obj) -> set[Any]:
    return {p["port"] for p in rule.get("ports", [])}


def _matches(rule_peers: list[Obj], labels: dict[str, str]) -> bool:
    return any(peer["podSelector"]["matchLabels"].items() <= labels.items() for peer in rule_peers)


def test_network_policies(objects: list[Obj]) -> None:
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    redis_pod = _statefulset(objects, REDIS)["spec"]["template"]["metadata"]["labels"]
    gateway_pod = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    driver_pod = {"sparkoperator.k8s.io/app-name": AGGREGATOR, "spark-role": "driver"}
    job_driver = {**find(objects, "SparkApplication", f"{FULLNAME}-job-orders")["spec"]["driver"]["labels"],
                  "spark-role": "driver"}
    kafka_pod = _statefulset(objects, KAFKA)["spec"]["template"]["metadata"]["labels"]

    redis = policies[REDIS]
    def allowed(labels: dict[str, str], port: str) -> bool:
        return any(_matches(rule.get("from", []), labels) and port in _ports(rule) for rule in redis["ingress"])

    for client in (gateway_pod, driver_pod, job_driver):
        assert allowed(client, "redis") and allowed(client, "sentinel"), client
    # Replication and the Sentinels between the Redis pods.
    assert allowed(redis_pod, "redis") and allowed(redis_pod, "sentinel")
    assert not allowed(kafka_pod, "redis") and not allowed(kafka_pod, "sentinel")
    # Redis now calls the other Redis pods (and DNS for their names), nobody else.
    assert {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]} in redis["egress"]
    to_redis = [r for r in redis["egress"] if "to" in r]
    assert len(to_redis) == 1 and _matches(to_redis[0]["to"], redis_pod) and _ports(to_redis[0]) == {6379, 26379}
    # The clients may call both ports of the Redis pods.
    for name in (f"{FULLNAME}-gateway", f"{AGGREGATOR}-driver", f"{FULLNAME}-job-orders-driver"):
        rules = [r for r in policies[name]["egress"] if _matches(r.get("to", []), redis_pod)]
        assert rules and {6379, 26379} <= set().union(*(_ports(r) for r in rules)), name

    kafka = policies[KAFKA]
    assert any(_matches(rule["from"], kafka_pod) and "controller" in _ports(rule) for rule in kafka["ingress"])
    assert not any(_matches(rule["from"], gateway_pod) for rule in kafka["ingress"])
    assert any(_matches(r.get("to", []), kafka_pod) and {9092, 9093} <= _ports(r) for r in kafka["egress"])


def test_single_redis_policy_is_unchanged(default_objects: list[Obj]) -> None:
    redis = find(default_objects, "NetworkPolicy", REDIS)["spec"]
    assert redis["egress"] == [] and len(redis["ingress"]) == 1
    assert _ports(redis["ingress"][0]) == {"redis"}


# -- Kafka ------------------------------------------------------------------------------------------------


def _server_properties(objects: list[Obj]) -> dict[str, str]:
    text = find(objects, "ConfigMap", KAFKA)["data"]["server.properties"]
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_three_brokers_with_a_static_quorum(objects: list[Obj]) -> None:
    statefulset = _statefulset(objects, KAFKA)
    assert statefulset["spec"]["replicas"] == 3 and statefulset["spec"]["podManagementPolicy"] == "Parallel"
    props = _server_properties(objects)
    headless = f"{KAFKA}-headless.{NAMESPACE}.svc"
    assert props["controller.quorum.voters"] == ",".join(f"{i}@{KAFKA}-{i}.{headless}:9093" for i in range(3))
    assert "controller.quorum.bootstrap.servers" not in props and "node.id" not in props
    assert props["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9093"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "share.coordinator.state.topic.replication.factor", "default.replication.factor"):
        assert props[key] == "3", key
    for key in ("min.insync.replicas", "transaction.state.log.min.isr", "share.coordinator.state.topic.min.isr"):
        assert props[key] == "2", key
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][2]
    assert 'echo "node.id=$ordinal"' in script
    assert f"advertised.listeners=PLAINTEXT://$POD_NAME.{headless}:9092" in script
    assert "--standalone" not in script
    assert {"name": "controller", "containerPort": 9093, "protocol": "TCP"} in container["ports"]
    service = find(objects, "Service", f"{KAFKA}-headless")["spec"]
    assert {p["port"] for p in service["ports"]} == {9092, 9093}


def test_the_cluster_id_is_shared_stable_and_valid(objects: list[Obj]) -> None:
    def cluster_id(objs: list[Obj]) -> str:
        script = _statefulset(objs, KAFKA)["spec"]["template"]["spec"]["containers"][0]["command"][2]
        return script.split("format -t ", 1)[1].split()[0].strip('"')

    first = cluster_id(objects)
    assert first == cluster_id(render([REPLICATED], {"kafka.deploy.partitions": 3})), "stable across renders"
    assert len(first) == 22 and not first.startswith("-")
    assert len(base64.urlsafe_b64decode(first + "==")) == 16


def test_topics_are_created_with_every_broker_as_replica(objects: list[Obj]) -> None:
    job = find(objects, "Job", f"{KAFKA}-topics")
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert "--replication-factor 3" in script and '"orders"' in script
    single = find(render([CHART / "ci" / "kind-values.yaml"]), "Job", f"{KAFKA}-topics")
    assert "--replication-factor 1" in single["spec"]["template"]["spec"]["containers"][0]["command"][2]


def test_the_single_broker_is_unchanged() -> None:
    objects = render([CHART / "ci" / "kind-values.yaml"])
    props = _server_properties(objects)
    assert props["node.id"] == "1" and props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    assert props["min.insync.replicas"] == "1" and "controller.quorum.voters" not in props
    statefulset = _statefulset(objects, KAFKA)
    assert statefulset["spec"]["replicas"] == 1 and "podManagementPolicy" not in statefulset["spec"]
    assert "--standalone" in statefulset["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert not has(objects, "PodDisruptionBudget", KAFKA)


def test_kafkas_storage_tool_accepts_the_config_and_cluster_id(objects: list[Obj], tmp_path: Path) -> None:
    """`kafka-storage format` (the one the pod runs, Kafka 4.1.1 from `make setup`) on pod 1's config:
    the static quorum names it, the cluster id parses, the node id is recorded."""
    from sparkwire_harness.stack.kafka_broker import _java_executable, kafka_libs_dir

    libs = kafka_libs_dir()
    if not any(libs.glob("kafka_*.jar")):
        pytest.fail(f"no Kafka jars in {libs}: run `make setup`", pytrace=False)
    script = _statefulset(objects, KAFKA)["spec"]["template"]["spec"]["containers"][0]["command"][2]
    cluster_id = script.split("format -t ", 1)[1].split()[0].strip('"')
    text = find(objects, "ConfigMap", KAFKA)["data"]["server.properties"]
    config = tmp_path / "server.properties"
    config.write_text(text.replace("/var/lib/kafka/data", str(tmp_path / "data"))
                      + f"node.id=1\nadvertised.listeners=PLAINTEXT://{KAFKA}-1:9092\n")
    result = subprocess.run([_java_executable(), "-Xmx128m", "-cp", f"{libs}/*", "kafka.tools.StorageTool", "format",
                             "-t", cluster_id, "-c", str(config)], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    meta = dict(line.split("=", 1) for line in (tmp_path / "data" / "logs" / "meta.properties").read_text().splitlines()
                if "=" in line and not line.startswith("#"))
    assert (meta["node.id"], meta["cluster.id"]) == ("1", cluster_id)
