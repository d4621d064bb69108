"""The client half of docs/protocol-conformance.yaml: the same scripted server frames fed to the Python
client (its frame handling and reconnect decision) and to the browser client in Chromium, which must
both do what the table says."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser

from sparkwire.client.reconnect import ReconnectPolicy, next_step
from sparkwire.client.session import ClientSession
from sparkwire.protocol.client_frames import Ping, encode_heartbeat
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.server_frames import (
    Welcome,
    encode_entry,
    encode_error,
    encode_snapshot,
    encode_welcome,
    pack_entries,
)
from sparkwire.replaylog.model import Entry, Snapshot, StateItem

from .browser import WAIT_MS, deliver, events, scripted_page, socket_opened

TABLE = yaml.safe_load((Path(__file__).resolve().parents[3] / "docs" / "protocol-conformance.yaml").read_text())
CLIENT_CASES = {case["id"]: case for case in TABLE["clients"]}
EPOCH = "e1"


def server_frame(step: dict[str, Any]) -> str:
    [(kind, value)] = step.items()
    if kind == "welcome":
        return encode_welcome(Welcome(session="srv-session", epoch=EPOCH, head_seq=0, recovered=value["recovered"],
                                      reset=value.get("reset"), ack_every=100, ack_interval_ms=60_000))
    if kind == "snapshot":
        items = {key: StateItem(seq=value["seq"], processing_id=f"s-{key}", data={}) for key in value["keys"]}
        [frame] = encode_snapshot(Snapshot(epoch=EPOCH, seq=value["seq"], items=items))
        return frame
    if kind == "entries":
        pairs = [(item, f"p{item}") if isinstance(item, int) else tuple(item) for item in value]
        entries = [encode_entry(Entry(seq=seq, processing_id=pid, key=f"k{seq % 2}", data=f'{{"n":{seq}}}',
                                      commit_ms=seq, batch_id=0)) for seq, pid in pairs]
        [frame] = pack_entries(EPOCH, entries)
        return frame
    if kind == "ping":
        return encode_heartbeat(Ping(value))
    if kind == "error":
        return encode_error(CloseCode(value), "scripted")
    raise ValueError(f"unknown scripted step {kind}")


@dataclass
class Outcome:
    applied: list[int]
    duplicates: int
    gaps: int
    sent: list[dict[str, Any]]
    next: str  # "reconnect" or "stop"; "" while the connection is still open
    cursor: int | None  # the next hello's cursor seq
    at_once: bool


def python_client(case: dict[str, Any]) -> Outcome:
    session = ClientSession(keep_applied=True)
    session.begin_connection()
    sent: list[dict[str, Any]] = []
    ended: tuple[int, bool] | None = None  # (code, client_gap)
    for step in case["server"]:
        if "close" in step:
            ended = (step["close"], False)
            break
        reaction = session.handle(server_frame(step))
        sent += [json.loads(frame) for frame in reaction.send]
        if reaction.gap is not None:
            ended = (1000, True)
            break
    decision, cursor, at_once = "", None, False
    if ended is not None:
        step = next_step(ended[0], attempt=0, welcomed=True, policy=ReconnectPolicy(), rng=random.Random(1),
                         client_gap=ended[1])
        decision, at_once = ("reconnect" if step.reconnect else "stop"), step.delay_s == 0
        hello = json.loads(session.begin_connection())
        cursor = hello["cursor"]["seq"] if "cursor" in hello else None
    return Outcome(applied=[seq for seq, _ in session.applied], duplicates=session.duplicates, gaps=session.gaps,
                   sent=[frame for frame in sent if frame["type"] != "ack"], next=decision, cursor=cursor,
                   at_once=at_once)


def browser_client(browser: Browser, console: list[str], case: dict[str, Any]) -> Outcome:
    page = scripted_page(browser, console, initialDelayMs=200, maxDelayMs=200)
    socket_opened(page, 0)
    closes = [step["close"] for step in case["server"] if "close" in step]
    deliver(page, 0, *[server_frame(step) for step in case["server"] if "close" not in step])
    if closes:
        page.evaluate("code => window.__sockets[0].drop(code, 'scripted')", closes[0])
    ended = bool(closes) or page.evaluate("window.__sockets[0].closedWith !== null")
    decision, cursor, at_once = "", None, False
    if ended:
        page.wait_for_function("window.__sockets.length > 1 || client.terminal !== null", timeout=WAIT_MS)
        if page.evaluate("client.terminal") is not None:
            decision = "stop"
        else:
            decision = "reconnect"
            hello = socket_opened(page, 1)[0]
            cursor = hello["cursor"]["seq"] if "cursor" in hello else None
            at_once = [status for status in events(page, "status") if status[0] == "waiting"][-1][2] == 0
    stats = page.evaluate("client.stats()")
    applied = [entry[0] for entry in events(page, "entry")]
    first_socket = [json.loads(text) for text in page.evaluate("window.__sockets[0].sent")]
    page.context.close()
    return Outcome(applied=applied, duplicates=stats["duplicates"], gaps=stats["gaps"],
                   sent=[frame for frame in first_socket[1:] if frame["type"] != "ack"], next=decision,
                   cursor=cursor, at_once=at_once)


def check_outcome(outcome: Outcome, case: dict[str, Any], who: str) -> None:
    expect = case["expect"]
    where = f"{who}, {case['id']} ({case['rule']}): {outcome}"
    assert outcome.applied == expect["applied"], where
    for name in ("duplicates", "gaps"):
        if name in expect:
            assert getattr(outcome, name) == expect[name], where
    assert outcome.sent == expect.get("sent", []), where
    assert outcome.next == expect.get("next", ""), where
    if "cursor" in expect:
        assert outcome.cursor == expect["cursor"], where
    if expect.get("at_once"):
        assert outcome.at_once, where


@pytest.mark.parametrize("case_id", list(CLIENT_CASES))
def test_python_client_case(case_id: str) -> None:
    check_outcome(python_client(CLIENT_CASES[case_id]), CLIENT_CASES[case_id], "python client")


@pytest.mark.parametrize("case_id", list(CLIENT_CASES))
def test_browser_client_case(browser: Browser, console: list[str], case_id: str) -> None:
    check_outcome(browser_client(browser, console, CLIENT_CASES[case_id]), CLIENT_CASES[case_id], "browser client")
