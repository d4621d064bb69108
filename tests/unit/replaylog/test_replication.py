"""``INFO replication`` replies -> ReplicationStatus, from the text Redis 7 sends (parsed as redis-py does)."""

from __future__ import annotations

from redis._parsers.helpers import parse_info

from sparkwire.replaylog.replication import ReplicaState, replication_status

REPLID = "5f1c3a3e0b4f1d6c8a9e2b7d4c6f8a0b1c2d3e4f"

PRIMARY = f"""# Replication\r
role:master\r
connected_slaves:3\r
slave0:ip=127.0.0.1,port=6380,state=online,offset=10500,lag=0\r
slave1:ip=127.0.0.1,port=6381,state=online,offset=9000,lag=2\r
slave2:ip=127.0.0.1,port=6382,state=wait_bgsave,offset=0,lag=0\r
master_failover_state:no-failover\r
master_replid:{REPLID}\r
master_replid2:0000000000000000000000000000000000000000\r
master_repl_offset:11000\r
second_repl_offset:-1\r
repl_backlog_active:1\r
repl_backlog_size:1048576\r
repl_backlog_first_byte_offset:1\r
repl_backlog_histlen:10999\r
"""

LONE = f"""# Replication\r
role:master\r
connected_slaves:0\r
master_failover_state:no-failover\r
master_replid:{REPLID}\r
master_replid2:0000000000000000000000000000000000000000\r
master_repl_offset:0\r
second_repl_offset:-1\r
repl_backlog_active:0\r
"""


def test_a_primary_with_replicas_reports_the_online_ones_and_their_largest_lag() -> None:
    status = replication_status(parse_info(PRIMARY))
    assert status.role == "master" and status.master_replid == REPLID and status.master_repl_offset == 11000
    assert status.replicas[0] == ReplicaState("127.0.0.1:6380", "online", 10500, 0)
    assert len(status.replicas) == 3
    # The syncing replica can acknowledge no WAIT and its offset says nothing yet: not counted.
    assert status.replicas_connected == 2
    assert status.lag_bytes == 11000 - 9000
    assert status.lag_seconds == 2


def test_a_lone_redis_has_no_replica_and_no_lag() -> None:
    status = replication_status(parse_info(LONE))
    assert (status.role, status.replicas, status.replicas_connected) == ("master", (), 0)
    assert (status.lag_bytes, status.lag_seconds) == (0, 0)
    assert status.master_replid == REPLID


def test_a_replica_ahead_of_the_offset_read_shows_no_negative_lag() -> None:
    # The replica's ack can arrive between the two numbers being read.
    text = PRIMARY.replace("offset=10500", "offset=11200").replace("offset=9000", "offset=11100")
    assert replication_status(parse_info(text)).lag_bytes == 0


def test_a_replication_id_of_digits_only_keeps_its_leading_zeros() -> None:
    # redis-py makes an int of it; the id must still compare equal to itself from one poll to the next.
    digits = "0123456789" * 4
    status = replication_status(parse_info(LONE.replace(REPLID, digits)))
    assert status.master_replid == digits


def test_raw_and_bytes_fields_are_read_as_well() -> None:
    info = {b"role": b"master", b"connected_slaves": b"1", b"master_replid": REPLID.encode(),
            b"master_repl_offset": b"500", b"slave0": b"ip=10.0.0.2,port=6379,state=online,offset=400,lag=1"}
    status = replication_status(info)
    assert status.replicas == (ReplicaState("10.0.0.2:6379", "online", 400, 1),)
    assert (status.lag_bytes, status.lag_seconds) == (100, 1)


def test_a_replica_reports_its_role_and_its_primary_history() -> None:
    text = f"role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6379\r\nmaster_link_status:up\r\n" \
           f"connected_slaves:0\r\nmaster_replid:{REPLID}\r\nmaster_repl_offset:42\r\n"
    status = replication_status(parse_info(text))
    assert (status.role, status.master_replid, status.replicas_connected) == ("slave", REPLID, 0)


def test_missing_fields_count_as_zero() -> None:
    status = replication_status({"role": "master", "connected_slaves": 1})  # slave0 missing
    assert (status.replicas, status.master_replid, status.lag_bytes) == ((), "", 0)
