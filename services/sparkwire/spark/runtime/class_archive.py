"""A class-data-sharing archive of a local driver JVM's classes, so that a (re)started driver comes up sooner.

A JVM started with ``-XX:SharedArchiveFile`` maps the classes of the archive instead of loading and verifying
them from Spark's jars, so a SparkSession and its first query start sooner (the measured difference:
docs/benchmarks.md, "Driver recovery"). The archive is JDK 17's dynamic
one, written when a JVM that ran a small streaming job like the aggregator's exits
(``-XX:ArchiveClassesAtExit``): it fits one JDK and one Spark classpath, and a JVM that cannot use it (another
JDK, another pyspark) ignores it and starts as before.

    python -m sparkwire.spark.runtime.class_archive [PATH]     # make setup writes .cache/spark-cds/driver.jsa
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkwire.spark.runtime.session import default_class_archive, spark_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _exercise(spark: object, workdir: Path) -> None:
    """A small streaming job shaped like the aggregator (JSON parse, watermark, dedup, windows, foreachBatch),
    so the archive holds the classes a driver's first batches load."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    assert isinstance(spark, SparkSession)
    source = workdir / "in"
    source.mkdir()
    (source / "events.json").write_text("".join(
        f'{{"ts": {1_700_000_000_000 + i * 100}, "metric": "m{i % 5}", "value": {i}.5, "id": "e{i}"}}\n'
        for i in range(500)))
    events = spark.readStream.schema("ts LONG, metric STRING, value DOUBLE, id STRING").json(str(source))
    windows = (events.withColumn("eventTime", F.timestamp_millis("ts")).withWatermark("eventTime", "5 seconds")
               .dropDuplicatesWithinWatermark(["id"])
               .groupBy(F.window("eventTime", "10 seconds"), "metric")
               .agg(F.count(F.lit(1)).alias("count"), F.avg("value").alias("avg"))
               .select(F.sha1(F.concat(F.unix_millis(F.col("window.end")).cast("string"), F.col("metric"))), "*"))
    query = (windows.writeStream.outputMode("append").trigger(availableNow=True)
             .option("checkpointLocation", str(workdir / "checkpoint"))
             .foreachBatch(_collect).start())
    query.awaitTermination()


def _collect(batch: DataFrame, _batch_id: int) -> None:
    batch.collect()


def create(path: Path) -> Path:
    """Run the job in a fresh local driver whose JVM writes the archive at its exit; then move it to ``path``
    (a reader never sees half a file). Runs in a child process: the JVM must exit for the archive to be
    written."""
    import subprocess
    import sys

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spark-cds-") as tmp:
        written = Path(tmp) / "driver.jsa"
        # The JVM lists every class it cannot archive (hundreds of lines): shown only when it fails.
        run = subprocess.run([sys.executable, "-m", "sparkwire.spark.runtime.class_archive", "--exercise", str(written),
                              str(Path(tmp) / "work")], capture_output=True, text=True, errors="replace")
        if run.returncode != 0 or not written.is_file():
            raise RuntimeError(f"the driver JVM wrote no class archive (exit {run.returncode}):\n"
                               + "\n".join((run.stdout + run.stderr).splitlines()[-30:]))
        os.replace(written, path)
    return path


def _run_exercise(archive_out: Path, workdir: Path) -> None:
    workdir.mkdir(parents=True)
    spark = spark_session("sparkwire-class-archive", class_archive="off",
                          java_options=f"-XX:ArchiveClassesAtExit={archive_out}")
    try:
        _exercise(spark, workdir)
    finally:
        spark.stop()
    # The JVM writes the archive as it exits, which it does when its stdin closes (pyspark's launcher).
    from pyspark import SparkContext

    jvm_process: Any = getattr(SparkContext._gateway, "proc", None)
    if jvm_process is not None:
        jvm_process.stdin.close()
        jvm_process.wait(timeout=300)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=default_class_archive(),
                        help="where to write the archive")
    parser.add_argument("--exercise", nargs=2, type=Path, metavar=("ARCHIVE", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.exercise:
        _run_exercise(*args.exercise)
        return 0
    print(f"class archive written: {create(args.path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
