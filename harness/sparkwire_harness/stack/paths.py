"""Where the local stack's downloaded pieces live (all produced by ``make setup``)."""

from __future__ import annotations

import os
from pathlib import Path

from sparkwire.paths import cache_dir, repo_root


class SetupMissingError(RuntimeError):
    """Something ``make setup`` provides is not there."""


def _missing(what: str, where: Path) -> SetupMissingError:
    return SetupMissingError(f"{what} not found at {where}: run `make setup` in {repo_root()} first")


def kafka_libs_dir() -> Path:
    """The folder of Kafka broker jars (``$SPARKWIRE_KAFKA_LIBS`` overrides)."""
    override = os.environ.get("SPARKWIRE_KAFKA_LIBS")
    libs = Path(override) if override else cache_dir() / "kafka" / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise _missing("Kafka broker jars", libs)
    return libs


def kafka_log4j_config() -> Path:
    """The broker's log4j2 configuration, kept in the repo."""
    config = repo_root() / "infra" / "kafka" / "log4j2.properties"
    if not config.is_file():
        raise _missing("Kafka log4j2 configuration", config)
    return config


def spark_connector_jars() -> list[Path]:
    """Jars to give Spark as ``spark.jars`` for its Kafka source and sink.

    ``$SPARKWIRE_SPARK_JARS`` (a folder) overrides ``<cache>/spark-jars``.
    """
    override = os.environ.get("SPARKWIRE_SPARK_JARS")
    folder = Path(override) if override else cache_dir() / "spark-jars"
    jars = sorted(folder.glob("*.jar"))
    if not any(jar.name.startswith("spark-sql-kafka-") for jar in jars):
        raise _missing("Spark Kafka connector jars", folder)
    return jars
