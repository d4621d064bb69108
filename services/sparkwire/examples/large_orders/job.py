"""A live feed of large orders: every order of at least ``threshold`` delivered as it arrives, exactly once,
under Spark's real-time mode (docs/deliver-your-own-query.md, "Real-time mode").

A team's own job, written only against the public API ``sparkwire.spark``. It reads the orders example's
topic (``sparkwire.examples.orders.produce`` writes it)::

    {"orderId": "o-17", "region": "eu-west", "amount": "19.90", "ts": 1764000000000}

and delivers one entry per Kafka record of a large order, its id the record's position: a record Spark
sends again after a failure is committed once. Its key is the region: the page shows each region's latest
large order on its card, and every one in its table of rows. An order its producer sent twice is two
records, two entries (dropping repeats by ``orderId`` needs state, which real-time mode does not run).
Records that are not orders are dropped by the query.

``--mode micro-batch`` runs the same query with micro-batches (``mode="append"``, the default trigger): the
side-by-side in docs/benchmarks.md compares the two.

Run it (settings from ``LARGE_ORDERS_*`` environment variables, see :func:`settings_from_environment`)::

    python -m sparkwire.examples.large_orders run [--mode realtime|micro-batch]
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from pyspark.sql import functions as F

from sparkwire.examples.orders.job import parsed_order, valid_order
from sparkwire.spark import (
    Target,
    add_placement_arguments,
    add_runtime_arguments,
    deliver,
    serve,
    session,
    stop_on_signals,
)


@dataclass(frozen=True)
class Settings:
    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "orders"
    stream: str = "large-orders"
    redis_url: str = "redis://127.0.0.1:6379/0"
    checkpoint: str = ".run/checkpoints/large-orders"
    threshold: str = "500"
    realtime_batch: str = "5 minutes"
    trigger_ms: int = 1_000
    replicas: int = 0


def settings_from_environment() -> Settings:
    """``LARGE_ORDERS_<FIELD>`` (``LARGE_ORDERS_TOPIC``, ``..._THRESHOLD``, ...) overrides each field."""
    found: dict[str, Any] = {}
    for item in fields(Settings):
        value = os.environ.get(f"LARGE_ORDERS_{item.name.upper()}")
        if value is not None:
            found[item.name] = int(value) if item.type == "int" else value
    return Settings(**found)


def placed(settings: Settings, args: argparse.Namespace) -> Settings:
    """``settings`` with the placement options given (what the Helm chart sets for every job) in place."""
    given = {"bootstrap_servers": args.bootstrap_servers, "redis_url": args.redis_url, "stream": args.stream,
             "checkpoint": args.checkpoint}
    found: dict[str, Any] = {name: value for name, value in given.items() if value}
    if args.redis_replicas >= 0:
        found["replicas"] = args.redis_replicas
    return replace(settings, **found)


def large_orders(raw: Any, threshold: str) -> Any:
    """Kafka records -> one row per valid order of at least ``threshold``, with its Kafka position."""
    parsed = raw.select(parsed_order().alias("order"), "topic", "partition", "offset")
    large = F.coalesce(valid_order() & (F.col("order.amount") >= F.lit(threshold).cast("decimal(12,2)")), F.lit(False))
    return parsed.where(large).select(
        F.col("order.orderId").alias("orderId"),
        F.col("order.region").alias("region"),
        F.col("order.amount").alias("amount"),
        F.timestamp_millis("order.ts").alias("orderTime"),
        "topic",
        "partition",
        "offset",
    )


def start(spark: Any, settings: Settings, mode: str = "realtime") -> Any:
    """Start the feed's query; returns it."""
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", settings.bootstrap_servers)
           .option("subscribe", settings.topic).option("startingOffsets", "earliest").load())
    target = Target(redis_url=settings.redis_url, checkpoint=settings.checkpoint,
                    realtime_batch=settings.realtime_batch, trigger_ms=settings.trigger_ms, replicas=settings.replicas)
    common: dict[str, Any] = {"stream": settings.stream, "key": "region", "title": "Large orders",
                              "value_fields": ("amount",), "units": {"amount": "EUR"}, "target": target}
    if mode == "realtime":
        return deliver(large_orders(raw, settings.threshold), mode="realtime", **common)
    return deliver(large_orders(raw, settings.threshold), mode="append", id_from=("topic", "partition", "offset"),
                   **common)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="deliver large orders as they arrive")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="deliver until stopped")
    run.add_argument("--mode", choices=("realtime", "micro-batch"), default="realtime",
                     help="Spark's real-time mode (default) or micro-batches, for comparison")
    add_runtime_arguments(run)
    add_placement_arguments(run)
    run.add_argument("--metrics-port", type=int, default=int(os.environ.get("SPARKWIRE_METRICS_PORT", "0")),
                     help="port of the Prometheus endpoint, 0 for none [env SPARKWIRE_METRICS_PORT]")
    args = parser.parse_args(argv)
    settings = placed(settings_from_environment(), args)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)
    stop = stop_on_signals()
    spark = session(args, f"sparkwire-{settings.stream}")
    return serve(spark, [start(spark, settings, args.mode)], stop)
