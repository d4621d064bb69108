"""The chart's redis.conf and redis-server arguments, run by a real redis-server (the one `make setup`
installs): the file parses, the durability settings are in force, the password is required, and the
probes' redis-cli authenticates through REDISCLI_AUTH."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from sparkwire_harness.stack.ports import free_port

from .conftest import FULLNAME, find, render

PASSWORD = "Zx81QwErTy0123456789abcdefABCDEF"


def _binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin")
    if found is None:
        pytest.fail(f"{name} not found: run `make setup` (it apt-installs redis-server)", pytrace=False)
    return found


@pytest.fixture(scope="module")
def chart_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, list[str]]]:
    objects = render()
    workdir = tmp_path_factory.mktemp("chart-redis")
    config = workdir / "redis.conf"
    text = find(objects, "ConfigMap", f"{FULLNAME}-redis")["data"]["redis.conf"]
    assert "\ndir /data\n" in text
    # Redis changes into `dir` while it reads the file: here the data directory is a temporary one.
    config.write_text(text.replace("\ndir /data\n", f"\ndir {workdir}\n"))
    container = find(objects, "StatefulSet", f"{FULLNAME}-redis")["spec"]["template"]["spec"]["containers"][0]
    args = [str(config) if a == "/etc/redis/redis.conf" else a.replace("$(REDIS_PASSWORD)", PASSWORD)
            for a in container["args"]]
    port = free_port()
    # Only where it listens differs from the pod: a free local port on loopback.
    command = [_binary("redis-server"), *args, "--port", str(port), "--bind", "127.0.0.1",
               "--logfile", str(workdir / "redis.log")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    client = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD, socket_timeout=1)
    try:
        deadline = time.monotonic() + 15
        while True:
            if process.poll() is not None:
                log = (workdir / "redis.log").read_text() if (workdir / "redis.log").exists() else ""
                raise AssertionError(f"redis-server refused the chart's config:\n{process.stderr.read()!r}\n{log}")
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield port, container["readinessProbe"]["exec"]["command"]
    finally:
        client.close()
        process.terminate()
        process.wait(10)


def test_durability_settings_are_in_force(chart_redis: tuple[int, list[str]]) -> None:
    port, _ = chart_redis
    with redis.Redis(host="127.0.0.1", port=port, password=PASSWORD, decode_responses=True) as client:
        settings = {key: client.config_get(key)[key]
                    for key in ("appendonly", "appendfsync", "maxmemory-policy", "maxmemory", "save")}
    assert settings == {"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction",
                        "maxmemory": str(384 * 1024 * 1024), "save": ""}


def test_password_is_required(chart_redis: tuple[int, list[str]]) -> None:
    port, _ = chart_redis
    with redis.Redis(host="127.0.0.1", port=port) as anonymous, pytest.raises(redis.AuthenticationError):
        anonymous.ping()


def test_probe_command_authenticates_with_rediscli_auth(chart_redis: tuple[int, list[str]]) -> None:
    port, probe = chart_redis
    assert probe[:2] == ["sh", "-c"] and "redis-cli -h 127.0.0.1 ping" in probe[2]
    script = probe[2].replace("redis-cli -h 127.0.0.1", f"{_binary('redis-cli')} -h 127.0.0.1 -p {port}")
    env = {**os.environ, "REDISCLI_AUTH": PASSWORD}
    assert subprocess.run(["sh", "-c", script], env=env, timeout=10, check=False).returncode == 0
    env["REDISCLI_AUTH"] = "wrong"
    assert subprocess.run(["sh", "-c", script], env=env, timeout=10, check=False,
                          stderr=subprocess.DEVNULL).returncode != 0


def test_maxmemory_fits_the_memory_limit() -> None:
    container = find(render(), "StatefulSet", f"{FULLNAME}-redis")["spec"]["template"]["spec"]["containers"][0]
    limit = container["resources"]["limits"]["memory"]
    assert limit.endswith("Mi") and int(limit[:-2]) > 384, "maxmemory 384mb must stay below the limit"


def test_aof_is_written_to_the_data_dir(chart_redis: tuple[int, list[str]]) -> None:
    port, _ = chart_redis
    with redis.Redis(host="127.0.0.1", port=port, password=PASSWORD) as client:
        client.xadd("sparkwire:{metrics}:log", {"k": "v"}, id="1-0")
        info = client.info("persistence")
    assert info["aof_enabled"] == 1 and info["aof_last_write_status"] == "ok"
