"""Static checks of images/ (this machine has no Docker engine to build them): pinned bases, non-root
users, one Spark version everywhere, pins from pyproject/constraints, the aggregator entry file where the
chart looks for it, and a build context that lets through what the COPY lines need."""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

from sparkwire.paths import cache_dir

from .conftest import CHART, REPO, load_yaml, pom_spark_version, pyspark_pin, unavailable

GATEWAY = REPO / "images" / "gateway" / "Dockerfile"
AGGREGATOR = REPO / "images" / "aggregator" / "Dockerfile"
AGGREGATE_PY = REPO / "images" / "aggregator" / "aggregate.py"
ENTRY_FILE = "/opt/sparkwire/aggregate.py"
RUN_MODULE_PY = REPO / "images" / "aggregator" / "run_module.py"
RUN_MODULE_FILE = "/opt/sparkwire/run_module.py"
# An exact release in the tag: 3.11.14-slim-bookworm, 4.0.0-scala2.13-java17-ubuntu, 3.9.11-eclipse-temurin-17.
PINNED_TAG = re.compile(r"^\d+\.\d+\.\d+(-[A-Za-z0-9._-]+)?$")


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


@dataclass
class Dockerfile:
    args: dict[str, str]  # ARGs declared before the first FROM, with their defaults
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def base_images(self) -> list[str]:
        names = {s.name for s in self.stages}
        return [s.image for s in self.stages if s.image not in names]


def parse(path: Path) -> Dockerfile:
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or not stripped:
            continue  # comments may sit between continued lines
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    assert not pending, f"{path}: dangling line continuation"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            image, _, alias = re.sub(r"\s+as\s+", " AS ", rest, flags=re.IGNORECASE).partition(" AS ")
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image.strip())
            stages.append(Stage(image, alias.strip() or None))
        elif not stages and keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        else:
            assert stages, f"{path}: {keyword} before FROM"
            stages[-1].instructions.append((keyword, rest.strip()))
    return Dockerfile(args, stages)


@pytest.fixture(scope="module", params=["gateway", "aggregator"])
def dockerfile(request: pytest.FixtureRequest) -> Dockerfile:
    return parse(GATEWAY if request.param == "gateway" else AGGREGATOR)


def test_base_images_are_pinned_to_exact_versions(dockerfile: Dockerfile) -> None:
    bases = dockerfile.base_images()
    assert bases
    for image in bases:
        name, _, tag = image.partition("@")[0].rpartition(":")
        assert name and PINNED_TAG.match(tag), f"{image}: not pinned to an exact version"


def test_final_stage_runs_as_a_numeric_non_root_user(dockerfile: Dockerfile) -> None:
    users = dockerfile.final.all("USER")
    assert users, "no USER in the final stage: it would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, users[-1]
    assert gid.isdigit() and int(gid) != 0, "numeric group too, so runAsNonRoot can be verified"


def test_python_packages_come_from_the_pins_without_dev_dependencies(dockerfile: Dockerfile) -> None:
    runs = " ".join(" ".join(s.all("RUN")) for s in dockerfile.stages)
    assert "--constraint constraints.txt --requirement /tmp/requirements.txt" in runs
    assert "images/requirements.py pyproject.toml" in runs
    assert "--no-deps" in runs, "the sparkwire wheel goes in without pulling pyspark"
    assert "[dev]" not in runs and "-e " not in runs
    assert "setuptools==${SETUPTOOLS_VERSION}" in runs
    [setuptools] = dockerfile.stage("build").all("ARG")
    assert re.fullmatch(r"SETUPTOOLS_VERSION=\d+\.\d+\.\d+", setuptools)
    copies = " ".join(" ".join(s.all("COPY")) for s in dockerfile.stages)
    assert "pyproject.toml constraints.txt" in copies


def test_both_images_use_the_same_python() -> None:
    assert parse(GATEWAY).args["PYTHON_IMAGE"] == parse(AGGREGATOR).args["PYTHON_IMAGE"]
    assert parse(GATEWAY).args["PYTHON_IMAGE"].startswith("python:3.11.")


def test_gateway_image() -> None:
    final = parse(GATEWAY).final
    env = " ".join(final.all("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env, "read-only root file system: no .pyc writes"
    assert final.all("ENTRYPOINT") == ['["sparkwire", "gateway"]']
    assert final.all("EXPOSE") == ["8080"]
    assert final.all("USER") == ["10001:10001"]
    assert final.all("COPY") == ["--from=build /opt/sparkwire/venv /opt/sparkwire/venv"], "nothing but the venv"


def test_one_spark_version_everywhere() -> None:
    spark_image = parse(AGGREGATOR).args["SPARK_IMAGE"]
    match = re.fullmatch(r"(?:apache/)?spark:(\d+\.\d+\.\d+)-scala2\.13-java17-ubuntu", spark_image)
    assert match, spark_image
    assert match.group(1) == pyspark_pin() == pom_spark_version()
    assert "spark-sql-kafka-0-10_2.13" in (REPO / "infra" / "maven" / "spark-kafka" / "pom.xml").read_text()


def test_aggregator_image() -> None:
    dockerfile = parse(AGGREGATOR)
    final = dockerfile.final
    assert final.all("USER") == ["185:185"], "Spark's own uid (the chart's runAsUser)"
    assert final.all("ENTRYPOINT") == ['["/opt/entrypoint.sh"]'], "Spark's driver/executor entrypoint"
    assert final.all("WORKDIR") == ["/opt/spark/work-dir"]
    copies = final.all("COPY")
    assert f"images/aggregator/aggregate.py {ENTRY_FILE}" in copies
    assert f"images/aggregator/run_module.py {RUN_MODULE_FILE}" in copies
    assert "--from=connector /build/jars/ /opt/spark/jars/" in copies
    assert "--from=spark /opt/java/openjdk /opt/java/openjdk" in copies
    connector = dockerfile.stage("connector")
    assert connector.all("COPY") == ["infra/maven/spark-kafka/pom.xml pom.xml"]
    [mvn] = connector.all("RUN")
    assert "mvn -B -q dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/build/jars" in mvn
    env = " ".join(final.all("ENV"))
    venv_python = "/opt/sparkwire/venv/bin/python"
    for setting in (f"PYSPARK_PYTHON={venv_python}", f"PYSPARK_DRIVER_PYTHON={venv_python}", "SPARK_HOME=/opt/spark",
                    "JAVA_HOME=/opt/java/openjdk", "PYTHONDONTWRITEBYTECODE=1"):
        assert setting in env
    checks = " ".join(final.all("RUN"))
    # The build fails unless the distribution, the connector and pyproject agree on Spark's version.
    for check in ('spark-core_2.13-${version}.jar', 'spark-sql-kafka-0-10_2.13-${version}.jar',
                  "pyspark.__version__ == '${version}'", "aggregate.py --help", "spark-distribution.pth",
                  "run_module.py sparkwire.examples.orders --help"):
        assert check in checks
    assert "SPARKWIRE_SPARK_JARS" not in env, "the jars are on the classpath; spark.jars would ship them again"


def test_entry_file_is_the_charts_main_application_file() -> None:
    if not (CHART / "values.yaml").is_file():
        unavailable(f"the sparkwire chart is not there ({CHART})")
    values = load_yaml(CHART / "values.yaml")
    assert values["aggregator"]["mainApplicationFile"] == f"local://{ENTRY_FILE}"


def test_entry_file_runs_sparkwire_aggregate() -> None:
    done = subprocess.run([sys.executable, str(AGGREGATE_PY), "--help"], capture_output=True, text=True,
                          timeout=60, cwd=REPO / "images")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: sparkwire aggregate")


def test_module_launcher_is_what_the_chart_runs_for_module_jobs() -> None:
    """A chart job given as ``module:`` runs ``local:///opt/sparkwire/run_module.py <module> <arguments>``."""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert f'"local://{RUN_MODULE_FILE}"' in helpers


def test_module_launcher_runs_the_module_as_main(tmp_path: Path) -> None:
    package = tmp_path / "teamjob"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import sys\nprint(__name__, sys.argv[1:])\nsys.exit(3 if sys.argv[1:] == ['run', '--x'] else 0)\n")
    done = subprocess.run([sys.executable, str(RUN_MODULE_PY), "teamjob", "run", "--x"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert (done.returncode, done.stdout.strip()) == (3, "__main__ ['run', '--x']"), done.stderr
    orders = subprocess.run([sys.executable, str(RUN_MODULE_PY), "sparkwire.examples.orders", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert orders.returncode == 0 and "{run,rebuild}" in orders.stdout, orders.stderr
    usage = subprocess.run([sys.executable, str(RUN_MODULE_PY)], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 1 and "MODULE" in usage.stderr


def _requirements_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_requirements", REPO / "images" / "requirements.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runtime_requirements_are_the_server_extras_but_pyspark_each_pinned_by_constraints() -> None:
    requirements = _requirements_module()
    pyproject = REPO / "pyproject.toml"
    derived = requirements.runtime_requirements(pyproject)
    assert not [r for r in derived if r.lower().startswith("pyspark")]
    assert len(derived) == len(requirements.dependencies(pyproject)) - 1
    names = [re.split(r"[\[=<>!~ ]", r)[0].lower().replace("_", "-") for r in derived]
    assert len(names) == len(set(names)), derived
    assert "sparkwire" not in names, "the server extra's own extras are expanded"
    assert {"starlette", "confluent-kafka", "websockets", "redis"} <= set(names)
    assert requirements.pyspark_version(pyproject) == pyspark_pin()
    constrained = {line.split("==")[0].lower().replace("_", "-")
                   for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line}
    for name in names:
        assert name in constrained, f"{name} is not in constraints.txt"


def test_requirements_script_runs_standalone() -> None:
    done = subprocess.run([sys.executable, "images/requirements.py", "pyproject.toml", "--pyspark"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, pyspark_pin())


def test_gateway_command_starts_without_pyspark() -> None:
    """The gateway image has no pyspark: `sparkwire gateway` must not import it."""
    blocker = (
        "import sys\n"
        "class NoPyspark:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pyspark' or name.startswith('pyspark.') or name == 'py4j':\n"
        "            raise ImportError('no ' + name + ' in the gateway image')\n"
        "sys.meta_path.insert(0, NoPyspark())\n"
        "from sparkwire.cli import main\n"
        "main(['gateway', '--help'])\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-1500:]


# --- the build context ---------------------------------------------------------------------------------


def dockerignore_allows(path: str, rules: list[str]) -> bool:
    """Docker's .dockerignore for the patterns used here: last match wins, `!` re-includes, a pattern that
    matches a parent directory matches everything below it."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    allowed = True
    for rule in rules:
        negate = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        if pattern.startswith("**/"):
            hit = any(fnmatch.fnmatch(part, pattern[3:]) for part in parts)
        else:
            hit = any(fnmatch.fnmatchcase(c, pattern) and c.count("/") == pattern.count("/") for c in candidates)
        if hit:
            allowed = negate
    return allowed


def test_dockerignore_lets_through_every_copy_source_and_nothing_heavy() -> None:
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    for path in (GATEWAY, AGGREGATOR):
        for stage in parse(path).stages:
            for copy in stage.all("COPY"):
                if copy.startswith("--from="):
                    continue
                *sources, _ = [w for w in copy.split() if not w.startswith("--")]
                for source in sources:
                    assert (REPO / source).exists(), f"{path.name}: COPY {source}: no such file"
                    assert dockerignore_allows(source, rules), f"{path.name}: COPY {source} is excluded"
    for heavy in (".venv/bin/python", ".cache/spark-jars/x.jar", ".git/HEAD", "tests/conftest.py",
                  "services/sparkwire/__pycache__/cli.cpython-311.pyc", "charts/sparkwire/values.yaml",
                  "harness/sparkwire_harness/stack/redis_server.py"):  # the test harness stays out of images
        assert not dockerignore_allows(heavy, rules), heavy
    assert dockerignore_allows("services/sparkwire/gateway/app.py", rules)


def test_connector_jars_do_not_duplicate_sparks_own() -> None:
    """The pom excludes what Spark ships (its jars are pyspark's): the image must not get two versions of a
    library on one classpath. Checked on the jars `make setup` resolved from the same pom."""
    resolved = cache_dir() / "spark-jars"
    try:
        import pyspark
    except ImportError:
        unavailable("pyspark is not installed in this environment: run `make setup`")
    spark_jars = Path(pyspark.__file__).parent / "jars"
    if not any(resolved.glob("*.jar")) or not spark_jars.is_dir():
        unavailable(f"no Spark connector jars in {resolved} or no jars in {spark_jars}: run `make setup` (resolves"
                    " the connector's from infra/maven/spark-kafka/pom.xml)")

    def artifact(jar: Path) -> str:
        return re.sub(r"-\d+(\.\d+)+([.-][\w.]+)?$", "", jar.stem)

    ours = {artifact(j) for j in resolved.glob("*.jar")}
    theirs = {artifact(j) for j in spark_jars.glob("*.jar")}
    assert "spark-sql-kafka-0-10_2.13" in ours
    assert not ours & theirs, f"also in Spark's jars: {sorted(ours & theirs)}"
