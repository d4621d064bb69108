"""The Python client as a user installs it: ``pip install 'sparkwire[client]'`` into a fresh virtualenv gets
the client and the protocol, none of the services' dependencies, and it receives a real gateway's entries
exactly once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib

from sparkwire.replaylog import ReplayLogReader

from .conftest import Committer, GatewayProcess

REPO = Path(__file__).resolve().parents[3]
SERVICES_ONLY = ["pyspark", "py4j", "redis", "hiredis", "confluent-kafka", "starlette", "uvicorn", "tenacity",
                 "prometheus-client", "pyjwt"]

# Run by the virtualenv's python: connect with no position (snapshot, then live), apply 100 live entries.
FOLLOW = """
import asyncio, json, sys
from sparkwire.client import StreamClient

async def main() -> None:
    client = StreamClient(sys.argv[1], keep_applied=True)
    task = asyncio.create_task(client.run())
    await client.wait_until(lambda: len(client.applied) >= 100, timeout=60)
    await client.stop()
    await task
    print(json.dumps({"applied": client.applied, "stats": str(client.stats)}))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtualenv with ``sparkwire[client]`` installed from a copy of the sources (as from an sdist: pip
    builds a wheel; the checkout gets no build folders)."""
    root = tmp_path_factory.mktemp("installed-client")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):  # the metadata's readme and licence files
        shutil.copy(REPO / name, source)
    shutil.copytree(REPO / "services", source / "services",
                    ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    installed = subprocess.run(
        [str(root / "venv" / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
         "-c", str(REPO / "constraints.txt"), f"{source}[client]"],
        capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    yield root / "venv" / "bin"


def test_the_client_extra_installs_no_service_dependency(client_venv: Path) -> None:
    listed = subprocess.run([str(client_venv / "pip"), "list", "--format=json", "--disable-pip-version-check"],
                            check=True, capture_output=True, text=True).stdout
    names = {package["name"].lower() for package in json.loads(listed)}
    assert {"sparkwire", "websockets"} <= names
    assert names.isdisjoint(SERVICES_ONLY), sorted(names & set(SERVICES_ONLY))


def test_the_sparkwire_command_says_which_extra_it_needs(client_venv: Path) -> None:
    done = subprocess.run([str(client_venv / "sparkwire"), "gateway", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert "pip install 'sparkwire[gateway]'" in done.stderr


def test_the_installed_client_applies_live_entries_exactly_once(
    client_venv: Path, gateway: GatewayProcess, committer: Committer, unique_name: str, redis: redis_lib.Redis
) -> None:
    committer.commit(4)
    committer.start()
    done = subprocess.run([str(client_venv / "python"), "-c", FOLLOW, gateway.ws(unique_name)],
                          capture_output=True, text=True, timeout=90)
    committer.stop()
    assert done.returncode == 0, done.stderr
    applied = [(seq, pid) for seq, pid in json.loads(done.stdout)["applied"]]
    seqs = [seq for seq, _ in applied]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a gap or a duplicate"
    logged = {entry.seq: entry.processing_id
              for entry in ReplayLogReader(redis, unique_name).read_after(seqs[0] - 1, count=len(seqs))}
    assert applied == [(seq, logged[seq]) for seq in seqs]
