"""Spike (issue 44): what Spark's real-time mode (``trigger(realTime=...)``) runs on the installed PySpark.

Starts a Kafka broker (the harness's) and a local SparkSession with the project's Kafka connector jars, then
tries, each on a fresh topic, a streaming query from Kafka under the real-time trigger:

* sinks: a PySpark ``foreach`` writer (an object with open/process/close, and a plain function), and
  ``foreachBatch`` (Spark's docs: refused);
* operators, into the foreach writer: filter, projection, ``explode``, ``union`` of two Kafka streams, a
  join with a broadcast static table, and a stateful ``groupBy().count()`` (refused on 4.2);
* a batch DataFrame's ``writeStream`` (refused by any trigger).

For each case it prints whether the query started and delivered rows, or the exact error. For the cases that
run it measures per-row latency: each value carries its produce time (``time.time_ns()`` just before
``Producer.produce`` + ``flush``), and the writer's ``process`` records ``time.time_ns()`` when called;
rows are produced one at a time, ``--gap-ms`` apart, after a warm-up row has arrived.

Run: ``flock /tmp/sparkwire-heavy.lock .venv/bin/python bench/realtime_spike.py`` (about 2-3 minutes;
``--rows``, ``--gap-ms``, ``--only CASE``). Output: one line per case, then a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from sparkwire.spark.runtime.session import QUICK_JIT, spark_session
from sparkwire_harness.stack import KafkaBroker


class FileWriter:
    """A ``ForeachWriter``-style object: one line per row, ``<epoch> <partition> <offset> <value> <now_ns>``,
    into a file per (task partition, epoch). Runs in the Python worker; the files are how the driver sees it."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.handle: Any = None

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.handle = open(f"{self.directory}/p{partition_id}-e{epoch_id}.txt", "a", buffering=1)  # noqa: SIM115
        self.epoch = epoch_id
        return True

    def process(self, row: Any) -> None:
        now = time.time_ns()
        fields = row.asDict()
        self.handle.write(f"{self.epoch} {fields.get('partition')} {fields.get('offset')} "
                          f"{fields.get('v')} {now}\n")

    def close(self, error: BaseException | None) -> None:
        if self.handle is not None:
            self.handle.close()


def function_writer(directory: str) -> Callable[[Any], None]:
    def write(row: Any) -> None:
        now = time.time_ns()
        fields = row.asDict()
        with open(f"{directory}/fn.txt", "a") as handle:
            handle.write(f"- {fields.get('partition')} {fields.get('offset')} {fields.get('v')} {now}\n")

    return write


def read_rows(directory: Path) -> list[list[str]]:
    rows = []
    for path in directory.glob("*.txt"):
        rows += [line.split() for line in path.read_text().splitlines() if line.strip()]
    return rows


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]


class Spike:
    def __init__(self, spark: Any, broker: KafkaBroker, workdir: Path, rows: int, gap_ms: int, trigger: str) -> None:
        self.spark = spark
        self.trigger = trigger
        self.stopping = threading.Event()
        self.broker = broker
        self.workdir = workdir
        self.rows = rows
        self.gap_ms = gap_ms
        self.burst = 0
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        self.results: dict[str, dict[str, Any]] = {}

    def kafka(self, topic: str) -> Any:
        return (self.spark.readStream.format("kafka").option("kafka.bootstrap.servers", self.broker.bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest").load())

    def parsed(self, topic: str) -> Any:
        from pyspark.sql import functions as F

        raw = self.kafka(topic)
        return raw.select(F.col("value").cast("string").alias("v"), "partition", "offset")

    def produce(self, topic: str, value: str) -> None:
        self.producer.produce(topic, value=value.replace("NOW", str(time.time_ns())))
        self.producer.flush(10)

    def run(self, name: str, build: Callable[[str, Path], Any], *, measure: bool = True,
            expect_rows: int = 1) -> None:
        topic = f"spike-{re.sub('[^A-Za-z0-9]', '-', name)}-{int(time.time())}"
        out = self.workdir / name
        out.mkdir(parents=True)
        result: dict[str, Any] = {"case": name, "trigger": self.trigger}
        self.results[name] = result
        query = None
        started = time.monotonic()
        try:
            for suffix in ("", "-b", "-out"):
                self.broker.create_topic(topic + suffix, partitions=2)
            query = build(topic, out)
            result["started"] = True
            # Warm-up: rows until one reaches the writer (the long batch's tasks and Python workers starting).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not read_rows(out):
                if query.exception() is not None:
                    break
                self.produce(topic, "warm:NOW")
                time.sleep(1.0)
            error = query.exception()
            if error is not None:
                raise RuntimeError(str(error))
            if not read_rows(out):
                result["delivered"] = False
                result["note"] = "no row reached the writer within 60 s"
                return
            result["first_row_s"] = round(time.monotonic() - started, 1)
            result["delivered"] = True
            if measure:
                before = len(read_rows(out))
                for n in range(self.rows):
                    self.produce(topic, f"m{n}:NOW")
                    time.sleep(self.gap_ms / 1000)
                for n in range(self.burst):  # back to back, one flush: does a full pickling batch go early?
                    self.producer.produce(topic, value=f"b{n}:{time.time_ns()}")
                self.producer.flush(10)
                deadline = time.monotonic() + 30
                wanted = before + (self.rows + self.burst) * expect_rows
                while time.monotonic() < deadline and len(read_rows(out)) < wanted:
                    time.sleep(0.2)
                for tag, label in (("m", "latency_ms"), ("b", "burst_latency_ms")):
                    latencies = [(int(r[-1]) - int(r[3].split(":")[1])) / 1e6 for r in read_rows(out)
                                 if r[3].startswith(tag)]
                    result[label.replace("latency_ms", "rows")] = len(latencies)
                    if latencies:
                        result[label] = {"p50": round(quantile(latencies, 0.5), 2),
                                         "p90": round(quantile(latencies, 0.9), 2),
                                         "max": round(max(latencies), 2), "min": round(min(latencies), 2)}
            result["epochs"] = sorted({r[0] for r in read_rows(out)})
        except Exception as error:  # the exact error is the evidence
            result.setdefault("started", False)
            result["error_type"] = type(error).__name__
            result["error"] = " ".join(str(error).split())[:1500]
        finally:
            self.stopping.set()
            if query is not None:
                try:
                    query.stop()
                except Exception:  # a failed query: stop() may raise its error again
                    traceback.print_exc(limit=1)
            print(f"[spike] {json.dumps(result)}", flush=True)
            self.stopping = threading.Event()

    def consume(self, topic: str, out: Path) -> None:
        """The Kafka sink's rows, as the writer's lines, read back by a consumer in this process."""
        from confluent_kafka import Consumer

        def run(stopping: threading.Event) -> None:
            consumer = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": f"spike-{topic}",
                                 "auto.offset.reset": "earliest", "fetch.wait.max.ms": 5})
            consumer.subscribe([topic])
            with open(out / "consumer.txt", "a", buffering=1) as handle:
                while not stopping.is_set():
                    message = consumer.poll(0.05)
                    if message is None or message.error():
                        continue
                    now = time.time_ns()
                    handle.write(f"- {message.partition()} {message.offset()} {message.value().decode()} {now}\n")
            consumer.close()

        threading.Thread(target=run, args=(self.stopping,), daemon=True).start()


def cases(spike: Spike) -> dict[str, Callable[[], None]]:
    from pyspark.sql import functions as F

    def rt(frame: Any, out: Path, writer: Any | None = None, name: str = "") -> Any:
        ckpt = str(out) + "-ckpt"
        return (frame.writeStream.outputMode("update").trigger(realTime=spike.trigger)
                .option("checkpointLocation", ckpt).foreach(writer or FileWriter(str(out))).start())

    def kafka_sink(topic: str, out: Path) -> Any:
        spike.consume(topic + "-out", out)
        return (spike.parsed(topic).select(F.col("v").alias("value")).writeStream.format("kafka")
                .option("kafka.bootstrap.servers", spike.broker.bootstrap).option("topic", topic + "-out")
                .option("kafka.linger.ms", "0").outputMode("update").trigger(realTime=spike.trigger)
                .option("checkpointLocation", str(out) + "-ckpt").start())

    def delivered(topic: str, out: Path) -> Any:
        """sparkwire's own ``deliver(mode="realtime")``: the row's commit time is when a reader of the replay log
        (polling it every 5 ms, in this process) sees it."""
        from sparkwire.replaylog import ReplayLogReader
        from sparkwire.spark import Target, deliver
        from sparkwire_harness.stack import RedisServer

        redis_server = RedisServer(spike.workdir.parent / "redis")
        redis_server.start()
        reader = ReplayLogReader(redis_server.client(), "spike")

        def read(stopping: threading.Event) -> None:
            seq = 0
            with open(out / "log.txt", "a", buffering=1) as handle:
                while not stopping.is_set():
                    for entry in reader.read_after(seq):
                        data = json.loads(entry.data)
                        handle.write(f"- {data['partition']} {data['offset']} {data['v']} {time.time_ns()}\n")
                        seq = entry.seq
                    time.sleep(0.005)
            redis_server.stop()

        threading.Thread(target=read, args=(spike.stopping,), daemon=True).start()
        return deliver(spike.parsed(topic).withColumn("topic", F.lit(topic)), stream="spike", key="v",
                       mode="realtime", target=Target(redis_url=redis_server.url, checkpoint=str(out) + "-ckpt",
                                                      realtime_batch=spike.trigger))

    def static_table() -> Any:
        return spike.spark.createDataFrame([(0, "zero"), (1, "one")], "p int, label string")

    return {
        "foreach-object": lambda: spike.run("foreach-object", lambda t, o: rt(spike.parsed(t), o)),
        "foreach-function": lambda: spike.run(
            "foreach-function", lambda t, o: rt(spike.parsed(t), o, function_writer(str(o)))),
        "kafka-sink": lambda: spike.run("kafka-sink", kafka_sink),
        "deliver-realtime": lambda: spike.run("deliver-realtime", delivered),
        "foreachBatch": lambda: spike.run("foreachBatch", lambda t, o: (
            spike.parsed(t).writeStream.outputMode("update").trigger(realTime=spike.trigger)
            .option("checkpointLocation", str(o) + "-ckpt").foreachBatch(lambda df, batch_id: None).start()),
            measure=False),
        "filter+projection": lambda: spike.run("filter+projection", lambda t, o: rt(
            spike.parsed(t).where(~F.col("v").startswith("x")).select(
                F.upper("v").alias("V"), "v", "partition", "offset"), o)),
        "explode": lambda: spike.run("explode", lambda t, o: rt(
            spike.parsed(t).select(F.explode(F.array(F.col("v"), F.col("v"))).alias("v"), "partition", "offset"), o),
            expect_rows=2),
        "union": lambda: spike.run("union", lambda t, o: rt(
            spike.parsed(t).unionByName(spike.parsed(t + "-b")), o)),
        "broadcast-join": lambda: spike.run("broadcast-join", lambda t, o: rt(
            spike.parsed(t).join(F.broadcast(static_table()), F.col("partition") == F.col("p")), o)),
        "stateful-groupBy": lambda: spike.run("stateful-groupBy", lambda t, o: rt(
            spike.parsed(t).groupBy("partition").count(), o), measure=False),
        "batch-dataframe": lambda: spike.run("batch-dataframe", lambda t, o: rt(static_table(), o), measure=False),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20, help="measured rows per case (default 20)")
    parser.add_argument("--gap-ms", type=int, default=200, help="time between measured rows (default 200)")
    parser.add_argument("--trigger", default="10 seconds", help="the real-time batch duration (default 10 seconds)")
    parser.add_argument("--burst", type=int, default=0, help="then this many rows back to back (default 0)")
    parser.add_argument("--only", action="append", default=[], help="run only this case (repeatable)")
    parser.add_argument("--master", default="local[4]", help="Spark master (default local[4]: real-time mode "
                        "holds a task slot per source partition for the whole batch)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rt-spike-") as tmp:
        workdir = Path(tmp)
        with KafkaBroker(workdir / "kafka", quick_jit=False) as broker:
            spark = spark_session("realtime-spike", master=args.master, java_options=QUICK_JIT)
            import pyspark

            print(f"[spike] pyspark {pyspark.__version__}, spark {spark.version}, master {args.master}", flush=True)
            spike = Spike(spark, broker, workdir / "out", args.rows, args.gap_ms, args.trigger)
            spike.burst = args.burst
            for name, case in cases(spike).items():
                if not args.only or name in args.only:
                    case()
            spark.stop()
        print(json.dumps(list(spike.results.values()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
