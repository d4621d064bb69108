"""``GET /streams`` and ``GET /descriptor`` on a real gateway serving two streams: the descriptor its writer
stored, 404 before there is one, and the bearer rule of ``/history``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import redis as redis_lib

from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.replaylog import ReplayLogWriter
from sparkwire_harness.stack import GatewayProcess, RedisServer

from .conftest import SECRET
from .test_history import get

DESCRIPTOR = {"version": 1, "stream": "x", "mode": "update", "key": ["region"], "valueFields": ["revenue"]}


def test_streams_and_their_descriptors(redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str,
                                       tmp_path: Path) -> None:
    other = f"{unique_name}-b"
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name, other]).start()
    try:
        assert get(f"{gateway.http}/streams") == (200, {"streams": sorted([unique_name, other])})
        status, body = get(f"{gateway.http}/descriptor?stream={unique_name}")
        assert status == 404 and "no descriptor" in body["error"]
        assert get(f"{gateway.http}/descriptor?stream=elsewhere")[0] == 404

        ReplayLogWriter(redis, unique_name).put_descriptor(json.dumps(DESCRIPTOR))
        assert get(f"{gateway.http}/descriptor?stream={unique_name}") == (200, DESCRIPTOR)
        assert get(f"{gateway.http}/descriptor?stream={other}")[0] == 404
    finally:
        gateway.stop()


def test_descriptor_and_stream_list_follow_the_token(redis_server: RedisServer, redis: redis_lib.Redis,
                                                     unique_name: str, tmp_path: Path) -> None:
    ReplayLogWriter(redis, unique_name).put_descriptor(json.dumps(DESCRIPTOR))
    other = f"{unique_name}-b"
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name, other], auth_secret=SECRET).start()
    now = int(time.time())
    url = f"{gateway.http}/descriptor?stream={unique_name}"
    try:
        assert get(url)[0] == 401
        assert get(url, issue_token(SECRET, [unique_name], -60, now=now))[0] == 401
        assert get(url, issue_token(SECRET, [other], 60, now=now))[0] == 403
        assert get(url, issue_token(SECRET, [unique_name], 60, now=now)) == (200, DESCRIPTOR)
        # The list shows only what the token grants.
        assert get(f"{gateway.http}/streams") == (200, {"streams": []})
        assert get(f"{gateway.http}/streams", issue_token(SECRET, [other], 60, now=now)) == (200, {"streams": [other]})
    finally:
        gateway.stop()
