"""``/ws``'s own reading of its query string: what Starlette's ``QueryParams`` would give, for any bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import QueryParams

from sparkwire.gateway.transport.websocket_endpoint import query_value

PIECES = st.sampled_from(["stream", "=", "&", "%2F", "%", "+", "a", "é", "%C3%A9", "%zz", ";", " ", "s"])


@given(st.lists(PIECES, max_size=14).map("".join))
def test_the_stream_parameter_reads_as_starlettes_query_params_read_it(text: str) -> None:
    query_string = text.encode()
    assert query_value(query_string, "stream") == QueryParams(query_string).get("stream", "")


def test_the_last_of_several_values_wins_and_escapes_are_decoded() -> None:
    assert query_value(b"stream=a&x=1&stream=metrics%2Fb+c", "stream") == "metrics/b c"
    assert query_value(b"", "stream") == "" and query_value(b"stream", "stream") == ""
