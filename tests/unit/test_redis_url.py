"""Redis URLs -> clients: the Sentinel URL's parsing, and which client each form makes (nothing connects)."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio as redis_async
import redis.asyncio.sentinel as async_sentinel
import redis.sentinel as sync_sentinel

from sparkwire.replaylog.redis_url import (
    ADDRESS_MAP_ENV,
    SentinelAddress,
    connect,
    connect_async,
    is_sentinel_url,
    parse_address_map,
    parse_sentinel_url,
)


def test_a_full_sentinel_url() -> None:
    address = parse_sentinel_url("redis+sentinel://:s%40cret@10.0.0.1:26380,sentinel-b:26381,[::1]:26382/main/3")
    assert address == SentinelAddress(
        sentinels=(("10.0.0.1", 26380), ("sentinel-b", 26381), ("::1", 26382)),
        master_name="main", db=3, username=None, password="s@cret")


def test_defaults_port_db_and_no_credentials() -> None:
    address = parse_sentinel_url("redis+sentinel://a,b:1/mymaster")
    assert address.sentinels == (("a", 26379), ("b", 1))
    assert (address.master_name, address.db, address.username, address.password) == ("mymaster", 0, None, None)
    assert parse_sentinel_url("redis+sentinel://a/mymaster/").master_name == "mymaster"


def test_user_and_password() -> None:
    address = parse_sentinel_url("REDIS+SENTINEL://app:pw:with:colons@h:2/m/0")
    assert (address.username, address.password) == ("app", "pw:with:colons")
    assert address.client_kwargs() == {"db": 0, "username": "app", "password": "pw:with:colons"}


@pytest.mark.parametrize(("url", "problem"), [
    ("redis+sentinel:///m", "no sentinel hosts"),
    ("redis+sentinel://:pw@/m", "no sentinel hosts"),
    ("redis+sentinel://h:1,,h:2/m", "bad sentinel address"),
    ("redis+sentinel://h:port/m", "bad port"),
    ("redis+sentinel://h:0/m", "bad port"),
    ("redis+sentinel://h:65536/m", "bad port"),
    ("redis+sentinel://h:/m", "bad port"),
    ("redis+sentinel://h:1", "no master name"),
    ("redis+sentinel://h:1/", "no master name"),
    ("redis+sentinel://h:1//0", "no master name"),
    ("redis+sentinel://h:1/m/x", "bad db"),
    ("redis+sentinel://h:1/m/-1", "bad db"),
    ("redis+sentinel://h:1/m/0/extra", "only /<master-name>"),
    ("redis+sentinel://h:1/m?db=2", "query string"),
    ("redis://h:1/0", "not a Sentinel URL"),
])
def test_malformed_sentinel_urls_are_refused_clearly(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_sentinel_url(url)


def test_errors_do_not_show_the_password() -> None:
    with pytest.raises(ValueError) as raised:
        parse_sentinel_url("redis+sentinel://:hunter2@h:bad/m")
    assert "hunter2" not in str(raised.value)


def test_which_urls_are_sentinel_urls() -> None:
    assert is_sentinel_url("redis+sentinel://h/m")
    assert not is_sentinel_url("redis://h:6379/0")
    assert not is_sentinel_url("rediss://h:6379/0")
    assert not is_sentinel_url("redis+sentinel")


def test_plain_urls_make_plain_clients() -> None:
    client = connect("redis://127.0.0.1:6399/2", socket_timeout=1.0)
    kwargs = client.connection_pool.connection_kwargs
    assert not isinstance(client.connection_pool, sync_sentinel.SentinelConnectionPool)
    assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs["socket_timeout"]) == ("127.0.0.1", 6399, 2, 1.0)
    with pytest.raises(ValueError):
        connect("http://127.0.0.1:6399/0")


def test_a_sentinel_url_makes_a_client_of_the_named_primary() -> None:
    client = connect("redis+sentinel://:pw@127.0.0.1:26390,127.0.0.1:26391/main/4", socket_timeout=1.5, db=9)
    pool = client.connection_pool
    assert isinstance(pool, sync_sentinel.SentinelConnectionPool)
    assert pool.service_name == "main" and pool.is_master
    assert (pool.connection_kwargs["db"], pool.connection_kwargs["password"]) == (4, "pw")  # the URL's win
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [26390, 26391]
    # Sentinels: the caller's timeout, no password, one try each (the next sentinel is the retry).
    sentinel_kwargs = sentinels[0].connection_pool.connection_kwargs
    assert sentinel_kwargs["socket_timeout"] == 1.5 and sentinel_kwargs["password"] is None
    assert sentinel_kwargs["retry"].get_retries() == 0
    client.close()


def test_async_clients_wait_for_a_free_connection_either_way() -> None:
    plain = connect_async("redis://127.0.0.1:6399/0", max_connections=7, timeout=5)
    assert isinstance(plain.connection_pool, redis_async.BlockingConnectionPool)
    replicated = connect_async("redis+sentinel://127.0.0.1:26390/main", max_connections=7, timeout=5,
                               health_check_interval=10)
    pool = replicated.connection_pool
    assert isinstance(pool, async_sentinel.SentinelConnectionPool)
    assert isinstance(pool, redis_async.BlockingConnectionPool)
    assert (pool.max_connections, pool.timeout, pool.connection_kwargs["health_check_interval"]) == (7, 5, 10)
    assert isinstance(replicated, redis_async.Redis) and not isinstance(replicated, redis.Redis)


def test_an_address_map_maps_announced_addresses_to_dialled_ones() -> None:
    assert parse_address_map("") == {}
    assert parse_address_map("10.0.0.1:6379=127.0.0.1:16379, redis-1.redis:6379=[::1]:16380,") == {
        ("10.0.0.1", 6379): ("127.0.0.1", 16379), ("redis-1.redis", 6379): ("::1", 16380)}


@pytest.mark.parametrize("text", ["10.0.0.1:6379", "10.0.0.1=127.0.0.1:1", "a:1=b:99999", "a:1=:2", "a:x=b:2"])
def test_a_malformed_address_map_is_refused_clearly(text: str) -> None:
    with pytest.raises(ValueError, match=ADDRESS_MAP_ENV):
        parse_address_map(text)


def test_the_sentinel_client_dials_the_mapped_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADDRESS_MAP_ENV, "10.0.0.1:6379=127.0.0.1:16379")
    client = connect("redis+sentinel://127.0.0.1:1/sparkwire")
    manager = client.connection_pool.sentinel_manager
    monkeypatch.setattr(sync_sentinel.Sentinel, "discover_master", lambda self, name: ("10.0.0.1", 6379))
    assert manager.discover_master("sparkwire") == ("127.0.0.1", 16379)
    monkeypatch.setattr(sync_sentinel.Sentinel, "discover_master", lambda self, name: ("10.0.0.2", 6379))
    assert manager.discover_master("sparkwire") == ("10.0.0.2", 6379)  # not in the map: as named
    client.close()


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6399/0", "redis+sentinel://127.0.0.1:26390/main"])
def test_a_pool_s_new_connections_share_one_driver_info_without_reading_package_metadata(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = connect_async(url, max_connections=4, timeout=5).connection_pool
    looked_up: list[str] = []
    monkeypatch.setattr("redis.utils.get_lib_version", lambda: looked_up.append("version") or "0")
    first, second = pool.make_connection(), pool.make_connection()
    assert looked_up == []
    assert first.driver_info is second.driver_info
    assert first.driver_info is not None and first.driver_info.lib_version  # CLIENT SETINFO still says it
