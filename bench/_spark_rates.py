"""Pure parts of bench/spark_throughput.py: reading the aggregator's progress log, judging a rate sustained,
and the window-close latency of one rendered result."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from _common import quantile  # bench/ is sys.path[0]

AGGREGATE_QUERY = "sparkwire-aggregate"
# The aggregator's driver heap in the bench (--driver-memory). Spark's default 1g runs out (OutOfMemoryError)
# on million-event micro-batches: the dedup state of ~a million event ids, kept in two versions, beside the
# batch itself. The machine has 24 GiB.
DRIVER_MEMORY = "4g"


@dataclass(frozen=True)
class Batch:
    batch_id: int
    rows: int
    duration_ms: int
    phases: Mapping[str, int] = field(default_factory=dict)  # Spark's durationMs of the progress
    collect_ms: float = 0.0  # the sink's collect(): the batch's plan run (Kafka read, parse, state)
    sink_ms: float = 0.0  # the whole foreachBatch function: collect + the Redis commit

    def phase_ms(self, name: str) -> float:
        """A phase of Spark's progress; ``"redis"``: the sink's commit after its collect."""
        if name == "redis":
            return self.sink_ms - self.collect_ms
        if name == "collect":
            return self.collect_ms
        return float(self.phases.get(name, 0))


def _documents(log_lines: Iterable[str], event: str) -> Iterable[dict[str, object]]:
    for line in log_lines:
        if f'"{event}"' in line:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("event") == event:
                yield doc


def aggregate_batches(log_lines: Iterable[str], query: str | None = AGGREGATE_QUERY) -> list[Batch]:
    """The aggregate query's micro-batches from the aggregator's JSON log: ``query progress`` lines, with
    the sink's ``batch committed`` timings of the same batch id. ``query``: another query's name (None: a
    query started without one, as the orders example's)."""
    lines = list(log_lines)
    sink = {int(str(doc["batchId"])): (float(str(doc.get("collectMs", 0))), float(str(doc.get("commitMs", 0))))
            for doc in _documents(lines, "sink_commit")}
    batches = []
    for doc in _documents(lines, "query_progress"):
        if doc.get("name") == query:
            batch_id = int(str(doc["batchId"]))
            phases = doc.get("phasesMs")
            collect_ms, sink_ms = sink.get(batch_id, (0.0, 0.0))
            batches.append(Batch(batch_id, int(str(doc["rowsIn"])), int(str(doc["durationMs"])),
                                 {str(k): int(v) for k, v in phases.items()} if isinstance(phases, dict) else {},
                                 collect_ms, sink_ms))
    return batches


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: ``rate@trigger_ms[/shuffle_partitions][/single][/tiered]``, e.g. ``50000@5000/4``;
    ``single``: the job without its dead-letter query (``--dead-letter-topic ''``), one Kafka read and
    parse of each record instead of two; ``tiered``: the driver with the JVM's full tiered JIT
    (``--driver-java-options ''``) instead of the job's default C1 only, which big batches need (docs/benchmarks.md,
    "Driver JIT")."""

    rate: int
    trigger_ms: int
    shuffle: int = 2
    dead_letters: bool = True
    tiered: bool = False

    @classmethod
    def parse(cls, text: str) -> RunSpec:
        rate, _, rest = text.strip().partition("@")
        trigger, _, options = rest.partition("/")
        shuffle, _, flags = options.partition("/")
        known = ("single", "tiered")
        given = [flag for flag in flags.split("/") if flag]
        if any(flag not in known for flag in given) or len(set(given)) != len(given):
            raise ValueError(f"bad run {text!r}: after the shuffle partitions only 'single' and 'tiered' may follow")
        spec = cls(int(rate), int(trigger or 1000), int(shuffle or 2), dead_letters="single" not in given,
                   tiered="tiered" in given)
        if min(spec.rate, spec.trigger_ms, spec.shuffle) < 1:
            raise ValueError(f"bad run {text!r}: rate, trigger and shuffle partitions must be >= 1")
        return spec

    @property
    def per_batch(self) -> int:
        return self.rate * self.trigger_ms // 1000

    @property
    def label(self) -> str:
        label = f"trigger {self.trigger_ms:,} ms, shuffle partitions {self.shuffle}"
        if not self.dead_letters:
            label += ", no dead-letter query"
        return label + (", full tiered JIT" if self.tiered else "")

    @property
    def options(self) -> list[str]:
        """The aggregator's command-line options for this run."""
        return ["--trigger-ms", str(self.trigger_ms), "--max-offsets-per-trigger", str(self.per_batch),
                "--shuffle-partitions", str(self.shuffle), *(["--driver-java-options="] if self.tiered else [])]


@dataclass(frozen=True)
class RateVerdict:
    rate: int
    measured: list[Batch]
    trigger_ms: int
    per_batch: int
    label: str = ""

    @property
    def full(self) -> bool:
        """Every measured batch read its whole quota (within 1 %: Spark splits it over the partitions): the
        backlog, not the input, set the pace."""
        return bool(self.measured) and all(b.rows >= 0.99 * self.per_batch for b in self.measured)

    def duration_ms(self, q: float) -> float:
        return quantile(sorted(b.duration_ms for b in self.measured), q)

    def phase_ms(self, name: str, q: float = 0.5) -> float:
        return quantile(sorted(b.phase_ms(name) for b in self.measured), q)

    @property
    def sustained(self) -> bool:
        """Each micro-batch of ``rate x trigger`` events ended within the trigger interval (p95 and the
        slowest within 1.25x of it), so the job keeps up with that input indefinitely."""
        return (self.full and self.duration_ms(0.95) <= self.trigger_ms
                and self.duration_ms(1.0) <= 1.25 * self.trigger_ms)

    @property
    def capacity(self) -> float:
        """Events per second of batch time: what the job could take with no idle time between batches."""
        busy = sum(b.duration_ms for b in self.measured)
        return 1000 * sum(b.rows for b in self.measured) / busy if busy else 0.0


def judge(rate: int, batches: Sequence[Batch], trigger_ms: int, warmup: int, label: str = "") -> RateVerdict:
    """The batches after the first ``warmup`` non-empty ones (JVM warm-up, the first state-store files)."""
    non_empty = [b for b in batches if b.rows > 0]
    return RateVerdict(rate, non_empty[warmup:], trigger_ms, rate * trigger_ms // 1000, label)


def highest_sustained(verdicts: Sequence[RateVerdict]) -> RateVerdict | None:
    ok = [v for v in verdicts if v.sustained]
    return max(ok, key=lambda v: (v.rate, -v.trigger_ms)) if ok else None


@dataclass(frozen=True)
class Rendered:
    """One result as a client got it: its window's end (event time = the producer's wall clock), when the
    commit script ran, and when the client received it (ms since the epoch)."""

    window_end_ms: int
    commit_ms: int
    received_ms: int

    @property
    def close_to_commit_ms(self) -> int:
        return self.commit_ms - self.window_end_ms

    @property
    def commit_to_render_ms(self) -> int:
        return self.received_ms - self.commit_ms

    @property
    def close_to_render_ms(self) -> int:
        return self.received_ms - self.window_end_ms


def per_window(rendered: Sequence[Rendered]) -> list[tuple[int, int]]:
    """(window end, close -> render ms) per window, by window end: its slowest result (a window's results are
    committed in one batch, so they differ by the client's reading only)."""
    slowest: dict[int, int] = {}
    for result in rendered:
        if result.window_end_ms:
            slowest[result.window_end_ms] = max(slowest.get(result.window_end_ms, 0), result.close_to_render_ms)
    return sorted(slowest.items())
