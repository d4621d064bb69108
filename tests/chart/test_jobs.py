"""Users' own jobs (``jobs:``, templates/jobs/): one SparkApplication, checkpoint PVC, metrics Service and pair
of NetworkPolicies per job, placed through the variables ``sparkwire.spark.main`` reads, apart from the
aggregator's selectors, served by the gateways; and the values the chart refuses for them."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
from typing import Any

import pytest

from .conftest import (
    CHART,
    FULLNAME,
    KUBE_VERSION,
    NAMESPACE,
    RELEASE,
    Obj,
    env_of,
    find,
    has,
    kinds,
    render,
    render_error,
    tool,
)

JOBS_VALUES = CHART / "ci" / "jobs-values.yaml"
AGGREGATOR = f"{FULLNAME}-aggregator"
ORDERS = f"{FULLNAME}-job-orders"
FRAUD = f"{FULLNAME}-job-fraud"
ORDERS_JOB = {"name": "orders", "stream": "orders", "module": "sparkwire.examples.orders"}


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    return render([JOBS_VALUES])


def _driver(app: Obj) -> Obj:
    containers: list[Obj] = app["spec"]["driver"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "spark-kubernetes-driver")


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def _pods(app: Obj) -> tuple[dict[str, str], dict[str, str]]:
    """The labels the driver and an executor pod of ``app`` carry: the template's, the operator's, Spark's."""
    spec = app["spec"]
    common = {"sparkoperator.k8s.io/app-name": app["metadata"]["name"], **spec["driver"]["labels"]}
    assert spec["driver"]["template"]["metadata"]["labels"].items() <= common.items()
    return {**common, "spark-role": "driver"}, {**common, "spark-role": "executor"}


def test_one_spark_application_per_job_beside_the_aggregator(objects: list[Obj]) -> None:
    assert sorted(kinds(objects)["SparkApplication"]) == sorted([AGGREGATOR, ORDERS, FRAUD])
    orders, fraud = find(objects, "SparkApplication", ORDERS)["spec"], find(objects, "SparkApplication", FRAUD)["spec"]
    aggregator = find(objects, "SparkApplication", AGGREGATOR)["spec"]
    # A module runs through the launcher in the aggregator image; a job file is spark-submit's own.
    assert orders["image"] == aggregator["image"] == "sparkwire/aggregator:0.1.0"
    assert orders["mainApplicationFile"] == "local:///opt/sparkwire/run_module.py"
    assert orders["arguments"] == ["sparkwire.examples.orders", "run"]
    assert fraud["image"] == "registry.example/team-fraud/job:1.4.2"
    assert fraud["mainApplicationFile"] == "local:///opt/app/fraud_job.py"
    assert fraud["arguments"] == ["run"]
    assert "arguments" not in aggregator
    for spec in (orders, fraud):
        assert (spec["type"], spec["mode"], spec["sparkVersion"]) == ("Python", "cluster", "4.2.0")
        assert spec["restartPolicy"] == aggregator["restartPolicy"]
        assert spec["restartPolicy"]["type"] == "Always"
        assert spec["driver"]["serviceAccount"] == AGGREGATOR
        for role in ("driver", "executor"):
            pod = spec[role]["template"]["spec"]
            assert pod["securityContext"] == aggregator[role]["template"]["spec"]["securityContext"]
            assert [c["securityContext"] for c in pod["containers"]] == [
                c["securityContext"] for c in aggregator[role]["template"]["spec"]["containers"]]
    # Resources default to the aggregator's, field by field.
    assert (fraud["driver"]["memory"], fraud["executor"]["instances"]) == ("2g", 2)
    assert fraud["driver"]["coreRequest"] == aggregator["driver"]["coreRequest"] == "250m"
    assert orders["executor"]["memory"] == aggregator["executor"]["memory"]
    # The driver's JIT kept to C1 (values.yaml, aggregator.driver.javaOptions), a job's too; executors keep theirs.
    assert orders["driver"]["javaOptions"] == aggregator["driver"]["javaOptions"] == "-XX:TieredStopAtLevel=1"
    assert "javaOptions" not in aggregator["executor"]
    # Every application leaves out Spark 4.2's own executor NetworkPolicy (the operator may not patch
    # it; the chart's policies govern the pods); a job's sparkConf is merged over that.
    no_spark_policy = {"spark.kubernetes.driver.pod.excludedFeatureSteps":
                       "org.apache.spark.deploy.k8s.features.NetworkPolicyFeatureStep"}
    assert fraud["sparkConf"] == {**no_spark_policy, "spark.sql.streaming.stateStore.providerClass":
                                  "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}
    assert orders["sparkConf"] == aggregator["sparkConf"] == no_spark_policy


def test_a_sparkconf_of_the_values_replaces_the_default_exclusion() -> None:
    """A cluster whose operator may manage NetworkPolicies can have Spark's own back: the values win."""
    key = "spark.kubernetes.driver.pod.excludedFeatureSteps"
    spec = find(render(sets={"aggregator.sparkConf": {key: "", "spark.ui.enabled": "false"}}),
                "SparkApplication", AGGREGATOR)["spec"]
    assert spec["sparkConf"] == {key: "", "spark.ui.enabled": "false"}


def test_the_driver_is_placed_through_the_variables_main_reads(objects: list[Obj]) -> None:
    for app, stream in ((ORDERS, "orders"), (FRAUD, "fraud-alerts")):
        env = env_of(_driver(find(objects, "SparkApplication", app)))
        assert env["SPARKWIRE_STREAM"]["value"] == stream
        assert env["SPARKWIRE_CHECKPOINT"]["value"] == "/var/lib/sparkwire/checkpoint"
        assert env["SPARKWIRE_BOOTSTRAP_SERVERS"]["value"] == f"{FULLNAME}-kafka.{NAMESPACE}.svc:9092"
        assert env["SPARKWIRE_REDIS_URL"]["value"] == \
            f"redis://:$(REDIS_PASSWORD)@{FULLNAME}-redis.{NAMESPACE}.svc:6379/0"
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": f"{FULLNAME}-redis",
                                                                      "key": "redis-password"}
        names = [e["name"] for e in _driver(find(objects, "SparkApplication", app))["env"]]
        assert names.index("REDIS_PASSWORD") < names.index("SPARKWIRE_REDIS_URL")
        assert env["SPARKWIRE_MASTER"]["value"] == ""
        assert env["SPARKWIRE_METRICS_PORT"]["value"] == "9108"
        assert "SPARKWIRE_SPARK_JARS" not in env and "SPARKWIRE_TOPIC" not in env
    orders_env = env_of(_driver(find(objects, "SparkApplication", ORDERS)))
    assert orders_env["ORDERS_TOPIC"]["value"] == "orders"


class _Placed(Exception):
    def __init__(self, namespace: argparse.Namespace) -> None:
        super().__init__("placed")
        self.namespace = namespace


def test_the_drivers_environment_parses_as_main_reads_it(objects: list[Obj], monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m sparkwire.examples.orders run`` in the job's driver: every SPARKWIRE_* variable is an option
    of ``sparkwire.spark.main``'s ``run`` and places the job where the chart says; ORDERS_* are the job's."""
    from sparkwire.examples.orders.job import job_from_environment
    main_module = importlib.import_module("sparkwire.spark.runtime.main")  # the module (the package exports main())

    env = _driver(find(objects, "SparkApplication", ORDERS))["env"]
    for entry in env:
        if "value" in entry:
            monkeypatch.setenv(entry["name"], entry["value"].replace("$(REDIS_PASSWORD)", "s3cret"))

    def capture(job: Any, args: argparse.Namespace) -> Any:
        raise _Placed(args)

    monkeypatch.setattr(main_module, "placed", capture)
    app = find(objects, "SparkApplication", ORDERS)["spec"]
    with pytest.raises(_Placed) as placed:
        main_module.main(job_from_environment(), app["arguments"][1:])
    args = placed.value.namespace
    set_by_chart = {e["name"] for e in env if e["name"].startswith("SPARKWIRE_")}
    unknown = {name for name in set_by_chart if not hasattr(args, name.removeprefix("SPARKWIRE_").lower())}
    assert not unknown, f"the chart sets {sorted(unknown)}, which sparkwire.spark.main does not read"
    assert (args.command, args.stream, args.checkpoint, args.master) == (
        "run", "orders", "/var/lib/sparkwire/checkpoint", "")
    assert args.bootstrap_servers == f"{FULLNAME}-kafka.{NAMESPACE}.svc:9092"
    assert args.redis_url == f"redis://:s3cret@{FULLNAME}-redis.{NAMESPACE}.svc:6379/0"
    assert (args.metrics_port, args.shuffle_partitions, args.spark_jars) == (9108, 2, "")


def test_job_pods_are_apart_from_the_aggregators_selectors(objects: list[Obj]) -> None:
    aggregator_driver, aggregator_executor = _pods(find(objects, "SparkApplication", AGGREGATOR))
    job_pods = [pod for app in (ORDERS, FRAUD) for pod in _pods(find(objects, "SparkApplication", app))]
    for pod in job_pods:
        assert pod["app.kubernetes.io/component"] == "job"
    metrics = find(objects, "Service", f"{AGGREGATOR}-metrics")["spec"]["selector"]
    affinity = find(objects, "SparkApplication", AGGREGATOR)["spec"]["executor"]["template"]["spec"]["affinity"]
    [term] = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    for selector in (metrics, term["labelSelector"]["matchLabels"], policies[AGGREGATOR]["podSelector"]["matchLabels"],
                     policies[f"{AGGREGATOR}-driver"]["podSelector"]["matchLabels"]):
        assert _selects(selector, aggregator_driver) or _selects(selector, aggregator_executor)
        assert not [pod for pod in job_pods if _selects(selector, pod)], selector
    # Each job's executors follow their own driver (ReadWriteOnce), or run anywhere (ReadWriteMany).
    orders_driver, _ = _pods(find(objects, "SparkApplication", ORDERS))
    orders = find(objects, "SparkApplication", ORDERS)["spec"]["executor"]["template"]["spec"]
    [term] = orders["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert [pod for pod in [aggregator_driver, *job_pods] if _selects(term["labelSelector"]["matchLabels"], pod)] == [
        orders_driver]
    assert "affinity" not in find(objects, "SparkApplication", FRAUD)["spec"]["executor"]["template"]["spec"]


def test_each_job_has_its_own_checkpoint(objects: list[Obj]) -> None:
    claims = {}
    for app in (AGGREGATOR, ORDERS, FRAUD):
        spec = find(objects, "SparkApplication", app)["spec"]
        for role in ("driver", "executor"):
            volume = next(v for v in spec[role]["template"]["spec"]["volumes"] if v["name"] == "checkpoint")
            claims.setdefault(app, set()).add(volume["persistentVolumeClaim"]["claimName"])
    assert claims == {AGGREGATOR: {f"{AGGREGATOR}-checkpoint"}, ORDERS: {f"{ORDERS}-checkpoint"},
                      FRAUD: {f"{FRAUD}-checkpoint"}}
    orders = find(objects, "PersistentVolumeClaim", f"{ORDERS}-checkpoint")
    assert orders["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", "keep: the aggregator's default"
    assert orders["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert orders["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert orders["metadata"]["labels"]["sparkwire.io/job"] == "orders"
    fraud = find(objects, "PersistentVolumeClaim", f"{FRAUD}-checkpoint")
    assert "annotations" not in fraud["metadata"], "keep: false"
    assert (fraud["spec"]["accessModes"], fraud["spec"]["storageClassName"]) == (["ReadWriteMany"], "nfs")
    assert fraud["spec"]["resources"]["requests"]["storage"] == "2Gi"


def test_an_existing_claim_is_used_and_not_created() -> None:
    objects = render(sets={"jobs": [{**ORDERS_JOB, "checkpoint": {"existingClaim": "orders-rwx"}}]})
    assert not has(objects, "PersistentVolumeClaim", f"{ORDERS}-checkpoint")
    spec = find(objects, "SparkApplication", ORDERS)["spec"]
    assert {v["persistentVolumeClaim"]["claimName"] for role in ("driver", "executor")
            for v in spec[role]["template"]["spec"]["volumes"] if v["name"] == "checkpoint"} == {"orders-rwx"}


def test_the_gateways_serve_every_jobs_stream(objects: list[Obj]) -> None:
    deployment = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert env_of(deployment)["SPARKWIRE_STREAMS"]["value"] == "metrics,orders,fraud-alerts"
    again = render(sets={"gateway.config.extraStreams": ["orders", "other"], "jobs": [ORDERS_JOB]})
    container = find(again, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert env_of(container)["SPARKWIRE_STREAMS"]["value"] == "metrics,orders,other"


def test_network_paths_of_job_pods(objects: list[Obj]) -> None:
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    orders_driver, orders_executor = _pods(find(objects, "SparkApplication", ORDERS))
    fraud_driver, fraud_executor = _pods(find(objects, "SparkApplication", FRAUD))
    aggregator_driver, aggregator_executor = _pods(find(objects, "SparkApplication", AGGREGATOR))

    def allowed_into(policy: str, labels: dict[str, str]) -> bool:
        return any(_selects(peer["podSelector"]["matchLabels"], labels)
                   for rule in policies[policy]["ingress"] for peer in rule.get("from", []))

    def governed_by(policy: str, labels: dict[str, str]) -> bool:
        return _selects(policies[policy]["podSelector"]["matchLabels"], labels)

    redis, kafka = f"{FULLNAME}-redis", f"{FULLNAME}-kafka"
    for driver in (orders_driver, fraud_driver, aggregator_driver):
        assert allowed_into(redis, driver) and allowed_into(kafka, driver)
    for executor in (orders_executor, fraud_executor, aggregator_executor):
        assert not allowed_into(redis, executor) and allowed_into(kafka, executor)
    # Each job's pods reach each other, not another application's.
    assert governed_by(ORDERS, orders_driver) and governed_by(ORDERS, orders_executor)
    assert allowed_into(ORDERS, orders_executor) and allowed_into(ORDERS, orders_driver)
    assert not allowed_into(ORDERS, fraud_executor) and not allowed_into(ORDERS, aggregator_executor)
    assert not allowed_into(AGGREGATOR, orders_executor)
    assert not governed_by(AGGREGATOR, orders_driver) and not governed_by(FRAUD, orders_driver)
    # The job's driver: scraped on its metrics port; Redis and the API server.
    driver_policy = policies[f"{ORDERS}-driver"]
    assert governed_by(f"{ORDERS}-driver", orders_driver) and not governed_by(f"{ORDERS}-driver", orders_executor)
    assert driver_policy["ingress"] == [{"ports": [{"port": 9108, "protocol": "TCP"}]}]
    ports = {p["port"] for rule in driver_policy["egress"] for p in rule.get("ports", [])}
    assert {443, 6443, 6379} <= ports
    assert {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]} in policies[ORDERS]["egress"]
    assert {p["port"] for rule in policies[ORDERS]["egress"] for p in rule.get("ports", [])} >= {9092}
    off = render([JOBS_VALUES], sets={"networkPolicy.enabled": False})
    assert "NetworkPolicy" not in kinds(off)


def test_the_in_chart_kafka_creates_the_jobs_topics(objects: list[Obj]) -> None:
    pod = find(objects, "Job", f"{FULLNAME}-kafka-topics")["spec"]["template"]["spec"]
    script = pod["containers"][0]["command"][-1]
    assert 'for topic in "metrics-raw" "metrics-deadletter" "orders"; do' in script


def test_no_dead_letter_topic_is_created_or_passed_when_it_is_empty() -> None:
    """``kafka.topics.deadLetter: ""``: the aggregator runs without its dead-letter query (``''`` reaches
    ``--dead-letter-topic`` through its variable) and no empty topic name reaches kafka-topics.sh."""
    objects = render([JOBS_VALUES], sets={"kafka.topics.deadLetter": ""})
    script = find(objects, "Job", f"{FULLNAME}-kafka-topics")["spec"]["template"]["spec"]["containers"][0]
    assert 'for topic in "metrics-raw" "orders"; do' in script["command"][-1]
    env = env_of(_driver(find(objects, "SparkApplication", AGGREGATOR)))
    assert env["SPARKWIRE_DEAD_LETTER_TOPIC"]["value"] == ""


def test_job_drivers_are_scraped() -> None:
    objects = render([JOBS_VALUES], sets={"observability.serviceMonitor.enabled": True})
    monitors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceMonitor"}
    assert set(monitors) == {f"{FULLNAME}-gateway", AGGREGATOR, f"{FULLNAME}-jobs"}
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    for monitor, expected in ((f"{FULLNAME}-jobs", {f"{ORDERS}-metrics", f"{FRAUD}-metrics"}),
                              (AGGREGATOR, {f"{AGGREGATOR}-metrics"})):
        selector = monitors[monitor]["spec"]["selector"]["matchLabels"]
        assert {n for n, s in services.items() if _selects(selector, s["metadata"]["labels"])} == expected
    for app in (ORDERS, FRAUD):
        driver, executor = _pods(find(objects, "SparkApplication", app))
        service = services[f"{app}-metrics"]["spec"]
        assert _selects(service["selector"], driver) and not _selects(service["selector"], executor)
        assert service["ports"][0]["targetPort"] == 9108
    assert not has(render(sets={"observability.serviceMonitor.enabled": True}), "ServiceMonitor", f"{FULLNAME}-jobs")


def test_jobs_without_the_aggregator_keep_the_drivers_service_account() -> None:
    objects = render(sets={"aggregator.enabled": False, "jobs": [ORDERS_JOB]})
    assert kinds(objects)["SparkApplication"] == [ORDERS]
    assert has(objects, "ServiceAccount", AGGREGATOR) and has(objects, "Role", AGGREGATOR)
    assert find(objects, "RoleBinding", AGGREGATOR)["subjects"][0]["name"] == AGGREGATOR
    assert find(objects, "SparkApplication", ORDERS)["spec"]["driver"]["serviceAccount"] == AGGREGATOR
    assert not has(objects, "Service", f"{AGGREGATOR}-metrics") and not has(objects, "NetworkPolicy", AGGREGATOR)
    # The aggregator does not run, so nobody else writes `stream`: a job may.
    alone = render(sets={"aggregator.enabled": False, "jobs": [{**ORDERS_JOB, "stream": "metrics"}]})
    assert env_of(_driver(find(alone, "SparkApplication", ORDERS)))["SPARKWIRE_STREAM"]["value"] == "metrics"
    without = render(sets={"aggregator.enabled": False})
    assert not has(without, "ServiceAccount", AGGREGATOR) and not has(without, "SparkApplication")


def test_job_settings_override_the_aggregators() -> None:
    objects = render(sets={"jobs": [{**ORDERS_JOB, "arguments": ["run", "--log-level", "DEBUG"],
                                     "image": {"tag": "2.0.0", "pullPolicy": "Never"}, "shufflePartitions": 4,
                                     "metricsPort": 9200, "logLevel": "DEBUG",
                                     "driver": {"coreRequest": "500m"}, "executor": {"instances": 3}}]})
    spec = find(objects, "SparkApplication", ORDERS)["spec"]
    assert (spec["image"], spec["imagePullPolicy"]) == ("sparkwire/aggregator:2.0.0", "Never")
    assert spec["arguments"] == ["sparkwire.examples.orders", "run", "--log-level", "DEBUG"]
    assert (spec["driver"]["coreRequest"], spec["executor"]["instances"]) == ("500m", 3)
    env = env_of(_driver(find(objects, "SparkApplication", ORDERS)))
    assert (env["SPARKWIRE_SHUFFLE_PARTITIONS"]["value"], env["SPARKWIRE_METRICS_PORT"]["value"],
            env["SPARKWIRE_LOG_LEVEL"]["value"]) == ("4", "9200", "DEBUG")
    assert _driver(find(objects, "SparkApplication", ORDERS))["ports"][0]["containerPort"] == 9200
    # The aggregator's image tag (what skaffold sets) is the jobs' default too.
    tagged = render(sets={"aggregator.image.tag": "abc@sha256:" + "0" * 64, "jobs": [ORDERS_JOB]})
    assert find(tagged, "SparkApplication", ORDERS)["spec"]["image"] == "sparkwire/aggregator:abc@sha256:" + "0" * 64


def _job(**changes: Any) -> dict[str, Any]:
    return {k: v for k, v in {**ORDERS_JOB, **changes}.items() if v is not None}


@pytest.mark.parametrize(("jobs", "sets", "message"), [
    pytest.param([_job(), _job(stream="other")], {}, 'two jobs are named "orders"', id="duplicate-name"),
    pytest.param([_job(), _job(name="again")], {}, 'stream "orders" is already written by jobs[0] (orders)',
                 id="stream-of-another-job"),
    pytest.param([_job(stream="metrics")], {}, 'stream "metrics" is already written by the aggregator',
                 id="stream-of-the-aggregator"),
    pytest.param([_job(mainApplicationFile="local:///opt/app/j.py")], {},
                 "set exactly one of mainApplicationFile", id="file-and-module"),
    pytest.param([_job(module=None)], {}, "set exactly one of mainApplicationFile", id="neither-file-nor-module"),
    pytest.param([_job(env=[{"name": "SPARKWIRE_STREAM", "value": "x"}])], {}, "env sets SPARKWIRE_STREAM",
                 id="env-overrides-the-stream"),
    pytest.param([_job(name="a" * 39)], {}, "at most 51 leave room", id="name-too-long"),
    pytest.param([_job(checkpoint={"existingClaim": "cp"}),
                  _job(name="b", stream="b", checkpoint={"existingClaim": "cp"})], {},
                 'checkpoint.existingClaim "cp" is also the checkpoint of jobs[0] (orders)', id="shared-claim"),
    pytest.param([_job(checkpoint={"existingClaim": "cp"})], {"aggregator.checkpoint.existingClaim": "cp"},
                 'is also the checkpoint of the aggregator', id="aggregators-claim"),
    pytest.param([_job()], {"aggregator.enabled": False, "kafka.bootstrapServers": ""},
                 "set kafka.bootstrapServers to your Kafka", id="no-kafka"),
    pytest.param([_job(realtime={"sourcePartitions": 4}, executor={"instances": 1, "cores": 2})], {},
                 "4 source partitions need executor instances x cores of at least 4, not 1 x 2",
                 id="realtime-too-few-slots"),
    pytest.param([_job(realtime={})], {}, "sourcePartitions", id="schema-realtime-partitions"),
    # The schema catches these first (the guards hold them with --skip-schema-validation too, below).
    pytest.param([_job(stream="bad stream!")], {}, "/jobs/0/stream", id="schema-stream-name"),
    pytest.param([_job(name="Orders")], {}, "/jobs/0/name", id="schema-name-dns-label"),
    pytest.param([_job(image={"repo": "x"})], {}, "additional properties 'repo' not allowed", id="schema-closed"),
])
def test_refused_jobs_say_what_to_change(jobs: list[dict[str, Any]], sets: dict[str, Any], message: str) -> None:
    assert message in render_error(sets={**sets, "jobs": jobs})


@pytest.mark.parametrize(("job", "message"), [
    (_job(stream="bad stream!"), 'stream "bad stream!" is not a valid stream name'),
    (_job(stream=""), 'stream "" is not a valid stream name'),
    (_job(name="Orders"), 'jobs[0].name "Orders" must be a DNS label'),
])
def test_guards_hold_without_the_schema(job: dict[str, Any], message: str) -> None:
    result = subprocess.run(
        [str(tool("helm")), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION,
         "--skip-schema-validation", "--set-json", f"jobs={json.dumps([job])}"],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_every_spark_job_waits_for_the_replicas_an_external_redis_asks_for_and_none_on_the_charts_own() -> None:
    """redis.external.replicasToAcknowledge reaches every Spark job (aggregator and jobs:) as
    SPARKWIRE_REDIS_REPLICAS; the chart's own Redis has no replica, so 0 there whatever the value says."""
    sentinel = "redis+sentinel://s1.example:26379,s2.example:26379/mymaster/0"
    external = render([JOBS_VALUES], sets={"redis.enabled": False, "redis.external.url": sentinel,
                                           "redis.external.replicasToAcknowledge": 1})
    own = render([JOBS_VALUES], sets={"redis.external.replicasToAcknowledge": 1})
    for name in (AGGREGATOR, ORDERS):
        assert env_of(_driver(find(external, "SparkApplication", name)))["SPARKWIRE_REDIS_REPLICAS"]["value"] == "1"
        assert env_of(_driver(find(own, "SparkApplication", name)))["SPARKWIRE_REDIS_REPLICAS"]["value"] == "0"


def test_a_realtime_job_with_a_slot_per_source_partition_renders() -> None:
    objects = render(sets={"jobs": [_job(realtime={"sourcePartitions": 2}, executor={"instances": 2, "cores": 1})]})
    assert find(objects, "SparkApplication", ORDERS)["spec"]["executor"]["instances"] == 2
