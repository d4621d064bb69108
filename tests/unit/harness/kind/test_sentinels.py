"""What the Sentinels and the data nodes answer from inside their pods, read: the majority's primary, INFO
fields, replicas caught up, a ROLE reply."""

from __future__ import annotations

from sparkwire_harness.kind.sentinels import majority, parse_info, pod_of, replicas_caught_up, role_name


def test_an_announced_address_names_its_pod() -> None:
    assert pod_of("sparkwire-redis-1.sparkwire-redis-headless.sparkwire.svc.cluster.local") == "sparkwire-redis-1"


def test_the_primary_is_what_two_of_three_sentinels_name() -> None:
    assert majority({"r-0": "r-1", "r-1": "r-1", "r-2": "r-0"}) == "r-1"
    assert majority({"r-0": "r-1", "r-2": "r-0"}) is None  # one each: no majority
    assert majority({"r-0": "r-1"}) is None
    assert majority({}) is None


INFO = """# Replication\r
role:master\r
connected_slaves:2\r
slave0:ip=sparkwire-redis-1.h,port=6379,state=online,offset=1234,lag=0\r
slave1:ip=sparkwire-redis-2.h,port=6379,state=online,offset=1234,lag=1\r
master_repl_offset:1234\r
"""


def test_info_fields_and_replicas_at_the_primarys_offset() -> None:
    info = parse_info(INFO)
    assert info["role"] == "master" and info["master_repl_offset"] == "1234"
    assert replicas_caught_up(info)


def test_a_replica_behind_offline_or_missing_is_not_caught_up() -> None:
    assert not replicas_caught_up(parse_info(INFO.replace("offset=1234,lag=1", "offset=1200,lag=1")))
    assert not replicas_caught_up(parse_info(INFO.replace("state=online,offset=1234,lag=0", "state=wait_bgsave")))
    assert not replicas_caught_up(parse_info(INFO.replace("slave1:", "x:")))
    # an offset that only starts with the primary's is another one
    assert not replicas_caught_up(parse_info(INFO.replace("offset=1234,lag=0", "offset=12345,lag=0")))


def test_a_role_reply_in_bytes_or_text() -> None:
    assert role_name([b"master", 1234, []]) == "master"
    assert role_name(["slave", "host", 6379, "connected", 10]) == "slave"
