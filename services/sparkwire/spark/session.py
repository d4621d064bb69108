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
            raise SystemExit(f"no jars in the Spark jars directory {directory!r}; run `make setup`")
        return jars
    return sorted(str(p) for p in (cache_dir() / "spark-jars").glob("*.jar"))


def default_class_archive() -> Path:
    """Where ``make setup`` writes the class-data-sharing archive (``sparkwire.spark.class_archive``)."""
    return cache_dir() / "spark-cds" / "driver.jsa"


def class_archive_options(archive: str) -> str:
    """The driver JVM's options that map ``archive``; empty: the checkout's archive when present, else none
    (it is optional); an archive named but missing is an error, as the jars directory is."""
    if archive and not Path(archive).is_file():
        raise SystemExit(f"no class archive at {archive!r}; `python -m sparkwire.spark.class_archive {archive}` "
                         "writes one, or pass --class-archive off")
    path = Path(archive) if archive else default_class_archive()
    return f"-XX:SharedArchiveFile={path}" if path.is_file() else ""


def spark_session(app_name: str, *, master: str = "local[2]", jars_dir: str = "", shuffle_partitions: int = 2,
                  driver_memory: str = "", class_archive: str = "", java_options: str = "") -> Any:
    """``master`` empty: left to spark-submit (as under the Spark operator). ``shuffle_partitions``: Spark's 200
    is slow for small state. With ``master`` set this process starts the driver JVM, and these apply to it
    (a JVM already running, or one spark-submit started, keeps its own): ``driver_memory`` its heap;
    ``class_archive`` a class-data-sharing archive (``sparkwire.spark.class_archive``: empty, the checkout's
    when present; ``off``, none); ``java_options`` its JVM options instead of the archive's."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    if master and driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    if master and not java_options and class_archive != "off":
        java_options = class_archive_options(class_archive)
    if master and java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
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
