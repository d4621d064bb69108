"""The SparkSession a sparkwire job runs in: UTC, few shuffle partitions, the Kafka connector's jars."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkwire.paths import cache_dir


def connector_jars(directory: str) -> list[str]:
    """The jars of ``directory``; empty: a source checkout's ``.cache/spark-jars`` when present (images have
    the jars on Spark's classpath already)."""
    if directory:
        jars = sorted(str(p) for p in Path(directory).glob("*.jar"))
        if not jars:
            raise SystemExit(f"--spark-jars {directory!r}: no jars there; name the directory of Spark's Kafka "
                             "connector jars, leave it empty (a checkout's .cache/spark-jars, `make setup`), or "
                             "unset it where Spark has them on its classpath")
        return jars
    return sorted(str(p) for p in (cache_dir() / "spark-jars").glob("*.jar"))


# The JIT's first tier only (C1). Spark's driver runs a little of a great deal of code per micro-batch (planning,
# state stores, commits), which C2 keeps compiling for minutes after a start on compiler threads that take
# CPU from the batches on a 1-2 core driver: measured (docs/benchmarks.md, "Driver JIT") a restart back
# sooner and steady batches shorter with C1 alone.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def default_class_archive() -> Path:
    """Where ``make setup`` writes the class-data-sharing archive (``sparkwire.spark.runtime.class_archive``)."""
    return cache_dir() / "spark-cds" / "driver.jsa"


def class_archive_options(archive: str) -> str:
    """The driver JVM's options that map ``archive``; empty: the checkout's archive when present, else none
    (it is optional); an archive named but missing is an error, as the jars directory is."""
    if archive and not Path(archive).is_file():
        raise SystemExit(f"--class-archive {archive!r}: no such file; `python -m sparkwire.spark.runtime.class_archive "
                         f"{archive}` writes one, or pass --class-archive off")
    path = Path(archive) if archive else default_class_archive()
    return f"-XX:SharedArchiveFile={path}" if path.is_file() else ""


def driver_java_options(class_archive: str, java_options: str) -> str:
    """The options of a driver JVM this process starts: the class archive's (``off``: none), then
    ``java_options``."""
    archive = class_archive_options(class_archive) if class_archive != "off" else ""
    return " ".join(option for option in (archive, java_options.strip()) if option)


def spark_session(app_name: str, *, master: str = "local[2]", jars_dir: str = "", shuffle_partitions: int = 2,
                  driver_memory: str = "", class_archive: str = "", java_options: str = "") -> Any:
    """``master`` empty: left to spark-submit (as under the Spark operator). ``shuffle_partitions``: Spark's 200
    is slow for small state. With ``master`` set this process starts the driver JVM, and these apply to it
    (a JVM already running, or one spark-submit started, keeps its own): ``driver_memory`` its heap;
    ``class_archive`` a class-data-sharing archive (``sparkwire.spark.runtime.class_archive``: empty, the checkout's
    when present; ``off``, none); ``java_options`` more JVM options (e.g. :data:`QUICK_JIT`)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    if master and driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    options = driver_java_options(class_archive, java_options) if master else ""
    if options:
        builder = builder.config("spark.driver.extraJavaOptions", options)
    jars = connector_jars(jars_dir)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = (
        builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark
