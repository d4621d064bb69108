from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkwire.protocol.close_codes import CLOSE_SPECS, MAX_REASON_BYTES, CloseCode, close_reason, is_resumable

PROTOCOL_DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def test_every_code_has_a_spec_with_a_reason_that_fits_a_close_frame() -> None:
    assert set(CLOSE_SPECS) == set(CloseCode)
    for code in CloseCode:
        assert code.spec.code is code
        assert 0 < len(code.reason.encode()) <= MAX_REASON_BYTES


def test_application_codes_are_in_the_private_range_and_standard_ones_are_registered() -> None:
    for code in CloseCode:
        assert 4000 <= code <= 4999 or code in {1000, 1001, 1003, 1008, 1009, 1011}


@pytest.mark.parametrize(
    "code",
    [CloseCode.GOING_AWAY, CloseCode.INTERNAL_ERROR, CloseCode.TIMEOUT, CloseCode.STREAM_RESET,
     CloseCode.SLOW_CONSUMER, CloseCode.REDIS_UNAVAILABLE],
)
def test_transient_server_conditions_are_resumable(code: CloseCode) -> None:
    assert code.resumable
    assert is_resumable(int(code))


@pytest.mark.parametrize(
    "code",
    [CloseCode.NORMAL, CloseCode.UNSUPPORTED_DATA, CloseCode.POLICY_VIOLATION, CloseCode.MESSAGE_TOO_BIG,
     CloseCode.PROTOCOL_VIOLATION, CloseCode.AUTH_FAILED, CloseCode.FORBIDDEN_STREAM, CloseCode.UNKNOWN_STREAM,
     CloseCode.UNSUPPORTED_VERSION],
)
def test_client_mistakes_are_terminal(code: CloseCode) -> None:
    assert not code.resumable
    assert not is_resumable(int(code))


@pytest.mark.parametrize("code", [1005, 1006, 1012, 1013, 1014, 4999, 3000])
def test_dropped_connections_and_unknown_codes_are_resumable(code: int) -> None:
    assert is_resumable(code)


def test_close_reason_is_cut_to_123_bytes_on_a_character_boundary() -> None:
    assert close_reason("short") == "short"
    cut = close_reason("é" * 200)
    assert len(cut.encode()) <= MAX_REASON_BYTES
    assert cut.endswith("...")
    assert set(cut[:-3]) == {"é"}


def test_the_documented_table_matches_the_code() -> None:
    rows = re.findall(r"^\| (\d{4}) \| `([a-z_]+)` \| (yes|no) \| (yes|no) \|", PROTOCOL_DOC.read_text(),
                      flags=re.MULTILINE)
    documented = {int(code): (name, resumable == "yes", error == "yes") for code, name, resumable, error in rows}
    assert documented == {int(code): (code.name.lower(), code.resumable, code.error_frame_first) for code in CloseCode}


def test_closes_the_client_caused_get_an_error_frame_and_the_servers_own_do_not() -> None:
    server_caused = {CloseCode.NORMAL, CloseCode.GOING_AWAY, CloseCode.INTERNAL_ERROR, CloseCode.STREAM_RESET,
                     CloseCode.REDIS_UNAVAILABLE}
    assert {code for code in CloseCode if not code.error_frame_first} == server_caused
    # Every terminal close but NORMAL is the client's doing, so it always says why.
    assert all(code.error_frame_first for code in CloseCode if not code.resumable and code is not CloseCode.NORMAL)
