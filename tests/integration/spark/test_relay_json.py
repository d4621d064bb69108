"""A real-time row's payload, made from Spark's ``to_json`` (results/relay_json.py), is the payload the
micro-batch path makes of the same row (``row_encoder`` over a collect): every supported type, nulls at every
level, the values whose JSON differs between the two (NaN and infinities, a float, a decimal small enough for
an exponent, a map with integer keys, timestamps with and without a zone)."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import functions as F

from sparkwire.spark.results.encoding import prepare, row_encoder
from sparkwire.spark.results.relay_json import TO_JSON_OPTIONS, parse, relay_columns, relay_decoder

ROWS = """
select true b, cast(7 as tinyint) t, cast(-3 as smallint) sh, 2147483647 i, 9223372036854775807 l,
  cast(0.1 as float) f, cast('NaN' as double) d, cast('-Infinity' as double) di, 1.0E10 dbig,
  cast('12.50' as decimal(10,2)) dec, cast('0.00000001' as decimal(20,10)) dsmall, cast(-5 as decimal(3,0)) dint,
  'é/"x"' s, cast('ab' as binary) bin, date'0099-01-02' day, timestamp'2026-11-24 10:00:00.000005' ts,
  timestamp_ntz'2026-11-24 10:00:00.000005' ntz, array(1.5D, cast('Infinity' as double), null) arr,
  named_struct('x', cast(null as bigint), 'y', 'z', 'when', timestamp'1969-12-31 23:59:59.999999') st,
  map('b', 2L, 'a', 1L) m, map(2, 'two', 1, 'one', -7, null) mi, map(date'2026-01-02', cast(0.5 as float)) md,
  array(named_struct('k', map(1, timestamp_ntz'2026-01-01 00:00:00'))) nested
union all
select null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
  array(), named_struct('x', 1L, 'y', cast(null as string), 'when', cast(null as timestamp)), map(), map(),
  cast(null as map<date, float>), array(cast(null as struct<k: map<int, timestamp_ntz>>))
"""


def test_the_relay_payload_is_the_micro_batch_payload_of_every_type(spark: Any) -> None:
    frame = spark.sql(ROWS)
    ready = prepare(frame)
    expected = [row_encoder(frame.schema)(row) for row in ready.collect()]
    relayed, columns = relay_columns(frame)
    texts = [row[0] for row in relayed.select(F.to_json(F.struct(*columns), TO_JSON_OPTIONS)).collect()]
    decode = relay_decoder(frame.schema)
    got = [decode(parse(text)) for text in texts]
    as_text = lambda payloads: [json.dumps(p, separators=(",", ":"), ensure_ascii=False) for p in payloads]  # noqa: E731
    assert as_text(got) == as_text(expected)
    assert expected[0]["dsmall"] == "0.0000000100" and expected[0]["f"] != 0.1  # the cases that differ in to_json
