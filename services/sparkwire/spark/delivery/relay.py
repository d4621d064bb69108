"""The relay of a real-time query: its rows, written by Spark's Kafka sink into a relay topic, committed into
the stream's replay log exactly once, in the driver's process.

Why a Kafka topic between them: real-time mode runs no ``foreachBatch``, and PySpark's ``foreach`` hands a long
batch's rows to Python only when the batch ends (seconds; docs/deliver-your-own-query.md, "Real-time mode").
Spark's Kafka sink sends each row as it comes (milliseconds), so the rows go through it, each with its source
position, and this relay reads them as they arrive and commits each poll's rows in one script call
(``lua/commit_rows.lua``): a row at or below its source's committed position is a re-sent one, refused in the
same atomic step that appends the others. The sink is at least once (a failed batch is sent again from its
start), and so is this relay's reading (its Kafka offsets are committed after the rows): both only re-send.

A relay message: key ``"<topic>/<partition>"`` of the source (one source's rows stay in order in one relay
partition), value ``{"s": source, "o": offset, "i": index, "r": row}``: ``r`` is the row as ``to_json`` writes
it (``results/relay_json.py`` turns it into the payload the micro-batch path would make).

A message that is not such a row (not JSON, a field missing, a row that does not decode into the stream's
columns: another producer wrote to the topic, or a query of another shape did) is no result and cannot be
committed; retried, it would stop the relay for good. It goes to the dead-letter topic
``sparkwire-relay.<stream>.dead-letter`` as it came, with the reason and its position in headers, is counted
(``sparkwire_relay_dead_letters_total``) and logged, and the rows after it go on; it is written there, and
flushed, before the relay's offsets move past it, so nothing is lost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkwire.replaylog import PositionedRecord, Record, ReplayLogWriter
from sparkwire.replaylog.writer import EpochFenced
from sparkwire.spark import metrics
from sparkwire.spark.results.records import key_text
from sparkwire.spark.results.relay_json import parse
from sparkwire.spark.stream import ID_FIELD, StreamSpec
from sparkwire.spark.types import JsonValue

log = logging.getLogger(__name__)

POLL_MAX_MESSAGES = 2_000
"""Rows read, and committed in one script call, at most per poll: more while the relay is behind, one while a
row at a time arrives."""


def relay_topic(stream: str) -> str:
    return f"sparkwire-relay.{stream}"


def relay_group(stream: str) -> str:
    return f"sparkwire-relay.{stream}"


def dead_letter_topic(stream: str) -> str:
    return f"{relay_topic(stream)}.dead-letter"


class NotARelayRow(ValueError):
    """A relay message this query's sink did not write: it goes to the dead-letter topic."""


@dataclass(frozen=True)
class RelayRow:
    source: str
    offset: int
    index: int
    row: dict[str, Any]


def relay_row(value: bytes | str | None) -> RelayRow:
    """The message's row; :class:`NotARelayRow` for what the sink does not write."""
    try:
        document = parse(value) if value is not None else None
        if not isinstance(document, dict) or not isinstance(document.get("r"), dict):
            raise NotARelayRow("not a JSON object with a row 'r'")
        return RelayRow(str(document["s"]), int(document["o"]), int(document["i"]), document["r"])
    except NotARelayRow:
        raise
    except (ValueError, KeyError, TypeError) as exc:  # JSON's errors are ValueErrors
        raise NotARelayRow(f"{type(exc).__name__}: {exc}") from exc


def positioned(row: RelayRow, decode: Callable[[dict[str, Any]], dict[str, JsonValue]],
               keys: tuple[str, ...]) -> PositionedRecord | None:
    """The row as the log commits it: its id ``<topic>/<partition>/<offset>`` (``#<index>`` for a record's
    second row on), its payload with that id, its key from the stream's key columns. None for a row whose key
    columns are all null: no result, as in the micro-batch path (skipped and counted). :class:`NotARelayRow`
    for a row that does not decode into the stream's columns."""
    try:
        payload = decode(row.row)
        null_key = all(payload[name] is None for name in keys)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NotARelayRow(f"the row does not decode into the stream's columns ({type(exc).__name__}: {exc})") from exc
    if null_key:
        return None
    pid = f"{row.source}/{row.offset}" + (f"#{row.index}" if row.index else "")
    payload[ID_FIELD] = pid
    key = key_text([payload[name] for name in keys])
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return PositionedRecord(row.source, row.offset, row.index, Record(pid, key, text))


class DeadLetters:
    """The relay's dead-letter topic: each message written as it came, then flushed (a message not taken
    raises, and the relay reads it again)."""

    def __init__(self, producer: Any, topic: str, flush_timeout_s: float = 30.0) -> None:
        self.producer = producer
        self.topic = topic
        self.flush_timeout_s = flush_timeout_s

    def write(self, letters: list[tuple[Any, str]]) -> None:
        failures: list[str] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(str(error))

        for message, reason in letters:
            position = f"{message.topic()}/{message.partition()}/{message.offset()}"
            self.producer.produce(self.topic, key=message.key(), value=message.value(), on_delivery=delivered,
                                  headers=[("sparkwire-error", reason.encode()),
                                           ("sparkwire-relay-position", position.encode())])
        left = self.producer.flush(self.flush_timeout_s)
        if left or failures:
            raise RuntimeError(f"dead-letter topic {self.topic}: {left} message(s) not written in "
                               f"{self.flush_timeout_s} s, errors: {failures[:3]}")


class Relay:
    """Reads the relay topic from its group's committed offsets and commits what it reads, until stopped or
    fenced (the log was lost: the stream has another epoch; the query is stopped then, as the micro-batch
    sink stops)."""

    def __init__(self, consumer: Any, writer: ReplayLogWriter, spec: StreamSpec,
                 decode: Callable[[dict[str, Any]], dict[str, JsonValue]], *, query_id: str, fence: str,
                 dead_letters: DeadLetters) -> None:
        self.consumer = consumer
        self.dead_letters = dead_letters
        self.writer = writer
        self.spec = spec
        self.decode = decode
        self.query_id = query_id
        self.fence = fence
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.committed = 0
        self.refused = 0
        self.skipped = 0
        self.dead = 0
        self.retry_delay_s = 1.0
        self._thread: threading.Thread | None = None

    def poll_once(self, timeout: float = 0.05) -> int:
        """Read what has arrived (up to :data:`POLL_MAX_MESSAGES`), commit it, then commit the offsets read.
        Returns the messages read."""
        # poll() returns at the first message; consume() would wait out its timeout for a full list.
        first = self.consumer.poll(timeout)
        if first is None:
            return 0
        messages = [first, *self.consumer.consume(POLL_MAX_MESSAGES - 1, 0)]
        rows: list[PositionedRecord] = []
        letters: list[tuple[Any, str]] = []
        skipped = 0
        for message in messages:
            if message.error() is not None:
                log.warning("relay topic: %s", message.error())
                continue
            try:
                record = positioned(relay_row(message.value()), self.decode, self.spec.keys)
            except NotARelayRow as exc:
                letters.append((message, str(exc)))
                continue
            if record is None:
                skipped += 1
            else:
                rows.append(record)
        if letters:
            self.dead_letters.write(letters)  # before the offsets move past them
            self.dead += len(letters)
            metrics.RELAY_DEAD_LETTERS.labels(stream=self.spec.stream).inc(len(letters))
            for message, reason in letters:
                log.error("stream %s: relay message %s/%d/%d is not a row of this query (%s): written to %s, not "
                          "delivered", self.spec.stream, message.topic(), message.partition(), message.offset(),
                          reason, self.dead_letters.topic)
        if skipped:
            self.skipped += skipped
            metrics.ROWS_SKIPPED.labels(stream=self.spec.stream).inc(skipped)
            if self.skipped == skipped:
                log.warning("stream %s: %d row(s) whose key columns %s are all null: no result, not delivered; "
                            "counted in sparkwire_sink_rows_skipped_total, not logged again", self.spec.stream,
                            skipped, list(self.spec.keys))
        if rows:
            # The entries' batch: the relay offset of the poll's first message (real-time batches are not seen here).
            started = time.perf_counter()
            result = self.writer.commit_rows(self.query_id, int(first.offset() or 0), rows, fence=self.fence)
            self.committed += result.appended
            self.refused += result.duplicates
            # The micro-batch sink's metrics, a poll's rows standing for a batch (docs/operations.md).
            metrics.BATCHES.labels(outcome="committed" if result.appended else "replayed").inc()
            metrics.RECORDS_COMMITTED.inc(result.appended)
            metrics.DUPLICATES_SUPPRESSED.inc(result.duplicates)
            metrics.COMMIT_SECONDS.observe(time.perf_counter() - started)
            metrics.LAST_SEQ.set(result.last_seq)
        # After the rows: a relay restarted before this reads them again, and they are refused then.
        self.consumer.commit(asynchronous=True)
        return len(messages)

    def run(self, on_stopped: Callable[[BaseException], None], active: Callable[[], bool]) -> None:
        """Until stopped, or the query is done and its rows read. A failed commit (an outage the writer's own
        retries outlasted) is retried from the committed offsets, rewound to before anything else is read: a
        row read past and not committed would be lost. Fenced (the log was lost) or failed otherwise, it calls
        ``on_stopped``, which stops the query: a job whose relay is gone must not go on reading Kafka."""
        checked = time.monotonic()
        rewind = False
        try:
            while not self.stopping.is_set():
                try:
                    if rewind:
                        self._rewind()
                        rewind = False
                    read = self.poll_once()
                    if time.monotonic() - checked > 1.0:
                        checked = time.monotonic()
                        # The query stopped (or failed) and what it sent is read: this relay's work is done.
                        if not read and not active():
                            return
                except EpochFenced:
                    raise
                except Exception:
                    log.exception("relay: %s; retrying in 1 s from the committed offsets (the rows are read again)",
                                  "rewinding failed" if rewind else "commit failed")
                    rewind = True
                    self.stopping.wait(self.retry_delay_s)
        except BaseException as exc:
            self.error = exc
            on_stopped(exc)
        finally:
            self.consumer.close()

    def _rewind(self) -> None:
        """Back to the committed offsets, so the rows of a failed commit are read again."""
        from confluent_kafka import OFFSET_BEGINNING

        for partition in self.consumer.committed(self.consumer.assignment(), timeout=10):
            if partition.offset < 0:
                partition.offset = OFFSET_BEGINNING
            self.consumer.seek(partition)

    def start(self, on_stopped: Callable[[BaseException], None], active: Callable[[], bool]) -> None:
        self._thread = threading.Thread(target=self.run, args=(on_stopped, active),
                                        name=f"sparkwire-relay-{self.spec.stream}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
