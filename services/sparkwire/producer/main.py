"""``sparkwire produce``: raw metric events into Kafka."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from sparkwire import logs
from sparkwire.options import (
    add_flag,
    add_option,
    add_renamed_seconds,
    non_negative_float,
    non_negative_int,
    positive_int,
    ratio,
)
from sparkwire.producer.events import GeneratorConfig, generate
from sparkwire.producer.publisher import make_producer, publish

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "--bootstrap-servers", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    add_option(parser, "--topic", default="metrics-raw", help="Kafka topic of raw metric events")
    add_option(parser, "--count", type=non_negative_int, default=0,
               help="events to produce (0: as many as --duration-ms allows)")
    add_option(parser, "--duration-ms", type=non_negative_int, default=0,
               help="event time to produce events for (with --rate)")
    add_renamed_seconds(parser, "--duration", "--duration-ms")
    add_option(parser, "--rate", type=non_negative_float, default=200.0, help="events per second of event time")
    add_option(parser, "--metrics", type=positive_int, default=4, help="number of distinct metric names")
    add_option(parser, "--sources", type=positive_int, default=8, help="number of distinct source ids")
    add_option(parser, "--seed", type=int, default=1, help="random seed: the same seed gives the same events")
    add_option(parser, "--start-ms", type=int, default=0,
               help="event time of the first event in epoch ms (0: now)")
    add_option(parser, "--max-disorder-ms", type=non_negative_int, default=0,
               help="events may be this much older than their position (keep below the watermark delay)")
    add_option(parser, "--duplicate-ratio", type=ratio, default=0.0, help="share of events sent twice")
    add_option(parser, "--malformed-ratio", type=ratio, default=0.0,
               help="share of events followed by a malformed record")
    add_option(parser, "--late-ratio", type=ratio, default=0.0,
               help="share of events followed by a late event, --late-by-ms older (dropped by the aggregator)")
    add_option(parser, "--late-by-ms", type=positive_int, default=60_000,
               help="how much older than the newest event a late event is (keep it far above the watermark "
                    "delay plus a few micro-batches of event time, so it is late without doubt)")
    add_option(parser, "--heartbeat-ms", type=non_negative_int, default=0,
               help="every this many ms of event time, a heartbeat to every partition (0: none); it moves "
                    "the watermark so the last window of a quiet stream closes")
    add_option(parser, "--idle-ms", type=non_negative_int, default=0,
               help="keep sending heartbeats this long after the last event (with --realtime: a quiet stream)")
    add_renamed_seconds(parser, "--idle-seconds", "--idle-ms")
    add_flag(parser, "--realtime", default=False,
             help="send each event when its event time comes instead of as fast as possible")
    add_option(parser, "--events-file", default="",
               help="write every record Kafka acknowledged here, for independent checking: JSON lines of "
                    "index (produced order), kind, value and partition, in acknowledgement order")
    add_option(parser, "--log-level", default="INFO", help="log level")


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    count = args.count or int(args.duration_ms / 1000 * args.rate)
    if count <= 0:
        raise SystemExit("sparkwire produce: error: nothing to produce: give --count N, or --duration-ms and a "
                         "--rate above 0")
    config = GeneratorConfig(
        seed=args.seed, metrics=args.metrics, sources=args.sources, rate=args.rate,
        start_ms=args.start_ms or int(time.time() * 1000), max_disorder_ms=args.max_disorder_ms,
        duplicate_ratio=args.duplicate_ratio, malformed_ratio=args.malformed_ratio,
        late_ratio=args.late_ratio, late_by_ms=args.late_by_ms, heartbeat_ms=args.heartbeat_ms,
        idle_ms=args.idle_ms,
    )
    stats = publish(
        generate(config, count),
        producer=make_producer(args.bootstrap_servers),
        topic=args.topic,
        realtime=args.realtime,
        events_file=Path(args.events_file) if args.events_file else None,
    )
    log.info("produced", extra={"fields": {"event": "produced", **vars(stats)}})
    return 0
