"""The local Kafka broker: its cluster ids (what ``kafka-storage format -t`` accepts) and its JVM's JIT."""

from __future__ import annotations

import base64
import random
import uuid
from pathlib import Path
from unittest import mock

from sparkwire_harness.stack.kafka_broker import QUICK_JIT, KafkaBroker, random_cluster_id


def test_a_cluster_id_is_a_uuid_in_url_safe_base64_that_never_starts_with_a_dash() -> None:
    # The first bytes of these UUIDs encode to a leading "-": the storage tool would take it for an option.
    rng = random.Random(7)
    dashed = [uuid.UUID(bytes=bytes([0xF8 | rng.randrange(4)]) + rng.randbytes(15)) for _ in range(3)]
    plain = uuid.UUID(bytes=b"\x10" + rng.randbytes(15))
    with mock.patch("uuid.uuid4", side_effect=[*dashed, plain]):
        cluster_id = random_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).rstrip(b"=").decode()
    assert len(cluster_id) == 22 and not cluster_id.startswith("-")
    assert all(not random_cluster_id().startswith("-") for _ in range(2000))


def test_a_broker_starts_with_the_quick_jit_unless_a_benchmark_asks_for_the_full_one(tmp_path: Path) -> None:
    quick = KafkaBroker(tmp_path).process.command
    full = KafkaBroker(tmp_path, quick_jit=False).process.command
    main_class = quick.index("kafka.Kafka")
    assert set(QUICK_JIT) <= set(quick[:main_class])  # JVM options go before the main class
    assert not set(QUICK_JIT) & set(full) and full == [part for part in quick if part not in QUICK_JIT]
