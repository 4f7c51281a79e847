"""Sentinel and Cluster URLs, ``durability``, finishes that heal, and clones of client objects.

Real servers: a lone redis-server (no replica: ``WAIT`` answers 0), and a
primary with a replica and 3 Sentinels (``redis_sentinel``, never failed over
here; the failover rounds are in ``test_redis_failover.py``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import Any

import pytest
import redis.asyncio
from anarchon._scheduler.assembly import lease_thread
from anarchon.backend.registry import resolve_backend
from anarchon.errors import BackendUnavailableError, InvalidConfigError, UnsupportedError
from anarchon.types import (
    ClaimInput,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunRetry,
    StoredResult,
)
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis._durability import parse_info
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import (
    Cluster,
    Server,
    start_replica,
    start_sentinels,
    start_server,
)

Replicated = Any  # conftest.Replicated: primary, replica, sentinels

SECRET = "hunter2-secret"


def _claim(job: str, slot: int, token: str | None = None, lease_ms: int = 30_000) -> RunClaim:
    return RunClaim(job, slot, token or uuid.uuid4().hex, "inst", lease_ms)


# URLs ---------------------------------------------------------------------------


def test_sentinel_url_names_hosts_service_and_db() -> None:
    backend = resolve_backend(
        f"redis+sentinel://app:{SECRET}@s1:26380,s2,[::1]:26381/main/3"
        "?socket_timeout=2&sentinel_password=x&durability=replicated&durability_replicas=2"
        "&durability_timeout=250"
    )
    assert isinstance(backend, RedisBackend)
    target = backend.target
    assert target is not None
    assert target.hosts == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert (target.service, target.db, target.username, target.password) == (
        "main",
        3,
        "app",
        SECRET,
    )
    assert target.options == {"socket_timeout": 2.0}
    assert target.sentinel == {"password": "x"}
    assert backend.durability.describe() == "replicated (2 replicas, 250 ms)"
    assert SECRET not in repr(backend)
    assert SECRET not in backend.describe()
    assert isinstance(resolve_backend("valkey+sentinel://h/svc"), ValkeyBackend)
    cluster = resolve_backend("redis+cluster://n1:7000,n2:7001/0")
    assert isinstance(cluster, RedisBackend)
    assert cluster.target is not None
    assert cluster.target.hosts == (("n1", 7000), ("n2", 7001))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"redis+sentinel://u:{SECRET}@h1:1,h2", "no service name"),
        (f"redis+sentinel://u:{SECRET}@h1:99999/s", "not a number from 1 to 65535"),
        (f"redis+sentinel://u:{SECRET}@h1:/s", "empty port"),
        (f"redis+sentinel://u:{SECRET}@h1,,h2/s", "empty host"),
        (f"redis+sentinel://u:{SECRET}@h/s/x", "not a whole number"),
        (f"redis+sentinel://u:{SECRET}@h/s/1/2", "/<service>[/db]"),
        (f"redis+sentinel://u:{SECRET}@h/s?bogus=1", "unknown option 'bogus'"),
        (f"redis+sentinel://u:{SECRET}@h/s?socket_timeout=-1", "above 0"),
        (f"redis+cluster://u:{SECRET}@h/2", "database 0 only"),
        (f"redis+cluster://u:{SECRET}@h?sentinel_password=x", "Sentinel URLs only"),
        (f"redis+sentinel://u:{SECRET}@/s", "no host"),
        (f"redis://u:{SECRET}@h/0?durability=eventual", "'fast', 'replicated'"),
        (f"redis://u:{SECRET}@h/0?durability_replicas=0", "at least 1"),
        (f"redis://u:{SECRET}@h/0?durability_timeout=soon", "whole number"),
    ],
)
def test_malformed_urls_raise_coded_errors_without_the_password(url: str, says: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        resolve_backend(url)
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    assert says in str(caught.value)
    assert SECRET not in str(caught.value)


def test_tls_topology_urls_are_refused_not_downgraded() -> None:
    with pytest.raises(InvalidConfigError, match="redis\\+sentinel://"):
        RedisBackend(f"rediss+sentinel://u:{SECRET}@h/s")


def test_durability_keywords_are_checked_where_the_backend_is_built() -> None:
    with pytest.raises(InvalidConfigError, match=r"'fast', 'replicated'.*'strong'"):
        RedisBackend("redis://h/0", durability="strong")
    with pytest.raises(InvalidConfigError, match="durability_replicas"):
        RedisBackend("redis://h/0", durability_replicas=-1)
    with pytest.raises(UnsupportedError, match="needs leases"):
        RedisBackend("redis://h/0", strategy="stream-id", durability="replicated")


# durability="replicated" ------------------------------------------------------------


async def test_without_a_replica_claims_are_uncertain_and_renewals_not_confirmed(
    redis_server: Server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = RedisBackend(
        redis_server.url, prefix=prefix, durability="replicated", durability_timeout=20
    )
    with caplog.at_level(logging.INFO, logger="anarchon.redis"):
        await backend.init()
    try:
        assert any(
            r.levelno == logging.WARNING and "asks 1 replica(s) but 0 are connected" in r.message
            for r in caplog.records
        )
        runs = backend.runs
        assert runs is not None
        claim = _claim("job", 1_000)
        outcome = await runs.claim(claim)
        assert outcome.kind == "uncertain"
        assert outcome.attempt == 1
        assert outcome.runner == "inst"
        # The store holds the lease for the token: another token sees it running.
        assert (await runs.claim(_claim("job", 1_000))).kind == "running"
        with pytest.raises(BackendUnavailableError, match="not confirmed on the replicas"):
            await runs.heartbeat("job", 1_000, claim.token, 30_000)
        assert not await runs.heartbeat("job", 1_000, "other-token", 30_000)  # refused: False
        retried = await runs.retry(RunRetry("job", 1_000, claim.token, "t2", "inst", 30_000, 3))
        assert (retried.kind, retried.attempt) == ("uncertain", 2)
        claim = _claim("job", 1_000, token="t2")
        with pytest.raises(BackendUnavailableError, match="finish not confirmed"):
            await runs.finish("job", 1_000, claim.token, "ok")
        assert await backend.claim(ClaimInput("plain", 5, "t", "inst")) is False
    finally:
        await backend.close()


async def test_with_a_replica_claims_heartbeats_and_finishes_are_confirmed(
    redis_sentinel: Replicated, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = RedisBackend(
        redis_sentinel.sentinels.url(),
        prefix=prefix,
        durability="replicated",
        durability_timeout=5000,  # a confirmed WAIT answers at once; a loaded machine may lag
    )
    with caplog.at_level(logging.INFO, logger="anarchon.redis"):
        await backend.init()
    try:
        assert any("1 replica(s) connected now (role master)" in r.message for r in caplog.records)
        runs = backend.runs
        assert runs is not None
        claim = _claim("job", 2_000)
        assert (await runs.claim(claim)).kind == "won"
        conn = await backend.connection()

        async def offset() -> int:
            return int(parse_info(await conn.execute("INFO", "replication"))["master_repl_offset"])

        before = await offset()
        again = await runs.claim(claim)  # an idempotent retry writes, so WAIT has a write
        assert again.kind == "won"
        assert await offset() > before
        assert await runs.heartbeat("job", 2_000, claim.token, 30_000)
        assert await runs.finish("job", 2_000, claim.token, "ok")
        before = await offset()
        assert await runs.finish("job", 2_000, claim.token, "ok")  # idempotent, and writes
        assert await offset() > before
        replica = redis.asyncio.Redis.from_url(redis_sentinel.replica.url)
        try:
            stored = await replica.hget(f"{{{prefix}job}}:state", "2000")
        finally:
            await replica.aclose()
        assert stored is not None
        assert b'"s":"finished"' in stored
    finally:
        await backend.close()


# Finishes that heal ---------------------------------------------------------------


async def test_a_finish_without_state_writes_a_finished_record(
    server: Server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    backend = cls(server.url, prefix=prefix)
    await backend.init()
    try:
        runs = backend.runs
        assert runs is not None
        with caplog.at_level(logging.WARNING, logger="anarchon.redis"):
            assert await runs.finish("lost", 10, "tok-a", "ok")
            assert await runs.finish_many([RunFinish("lost", 11, "tok-b", "error")]) == [True]
            result = StoredResult(12, "tok-c", "inst", "ok", started_at=1, finished_at=2)
            write = ResultWrite("lost", result, 100)
            done = await runs.finish_and_save_many([RunFinish("lost", 12, "tok-c", "ok")], [write])
            assert done == [True]
        healed = [r.message for r in caplog.records if "no state for the run" in r.message]
        assert len(healed) == 3
        assert "'lost' slot 10" in healed[0]
        assert await runs.finish("lost", 10, "tok-a", "ok")  # the same token again: True
        assert not await runs.finish("lost", 10, "tok-other", "ok")  # another token: False
        after = await runs.claim(_claim("lost", 10))
        assert after.kind == "done"
        states = {(s.slot, s.status) for s in await backend.history("lost", 10) if s.slot == 12}
        assert (12, "ok") in states
    finally:
        await backend.close()


# Clones for the lease thread ------------------------------------------------------


def _works_in_a_thread(backend: RedisBackendBase) -> str:
    """Init, claim and close ``backend`` on a loop of its own thread; the claim's kind."""
    found: list[Any] = []

    async def use() -> None:
        await backend.init()
        try:
            assert backend.runs is not None
            found.append((await backend.runs.claim(_claim("clone", 7))).kind)
        finally:
            await backend.close()

    thread = threading.Thread(target=lambda: asyncio.run(use()))
    thread.start()
    thread.join(30)
    return str(found[0]) if found else "failed"


async def test_clone_of_a_plain_client(redis_server: Server, prefix: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url, socket_timeout=3)
    try:
        backend = RedisBackend(client, prefix=prefix, durability_timeout=80)
        other = backend.clone()
        assert other is not None
        assert other.client is not backend.client
        assert other.durability.timeout_ms == 80
        assert other.prefix == prefix
        assert _works_in_a_thread(other) == "won"
        assert await client.ping()  # the user's client stays open
    finally:
        await client.aclose()


async def test_clone_of_a_sentinel_master_for_client(
    redis_sentinel: Replicated, prefix: str
) -> None:
    from redis.asyncio.sentinel import Sentinel

    manager = Sentinel([("127.0.0.1", p) for p in redis_sentinel.sentinels.ports])  # type: ignore[no-untyped-call]
    client = manager.master_for("anarchon")
    try:
        backend = RedisBackend(client, prefix=prefix)
        other = backend.clone()
        assert other is not None
        assert _works_in_a_thread(other) == "won"
        assert (await client.info("replication"))["role"] == "master"
    finally:
        await client.aclose()
        await manager.aclose()


async def test_clone_of_a_cluster_client(redis_cluster: Cluster, prefix: str) -> None:
    from redis.asyncio.cluster import RedisCluster

    client = RedisCluster.from_url(redis_cluster.url)
    try:
        await client.initialize()
        other = RedisBackend(client, prefix=prefix).clone()
        assert other is not None
        assert _works_in_a_thread(other) == "won"
    finally:
        await client.aclose()


class _Wrapped:
    """A real client behind a wrapper the backend cannot copy (as another library's client)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    async def execute_command(self, *args: Any) -> Any:
        return await self.real.execute_command(*args)


async def test_a_client_that_cannot_be_copied_warns_at_start(
    redis_server: Server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    from anarchon._scheduler.leases import LeaseKeeper

    real = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        backend = RedisBackend(_Wrapped(real), prefix=prefix)
        assert backend.clone() is None
        keeper: Any = LeaseKeeper.__new__(LeaseKeeper)  # not used before the warning
        executor: Any = None
        with caplog.at_level(logging.WARNING, logger="anarchon"):
            made = lease_thread(
                backend, None, keeper, executor, 3000, 1000, 5.0, logging.getLogger("anarchon")
            )
        assert made is None
        assert any(
            "heartbeats share the scheduler's event loop" in r.message
            and "loses its lease" in r.message
            for r in caplog.records
        )
    finally:
        await real.aclose()


async def test_waitaof_follows_wait_when_the_primary_writes_an_aof(prefix: str) -> None:
    """Redis 7.2+ with ``appendonly yes``: ``WAITAOF`` joins ``WAIT``, and claims are confirmed."""
    primary = start_server("redis86", appendonly=True)
    try:
        replica = start_replica(primary)
        try:
            backend = RedisBackend(
                primary.url, prefix=prefix, durability="replicated", durability_timeout=5000
            )
            await backend.init()
            try:
                assert backend.durability.waitaof
                assert backend.runs is not None
                claim = _claim("aof", 3_000)
                assert (await backend.runs.claim(claim)).kind == "won"
                assert await backend.runs.finish("aof", 3_000, claim.token, "ok")
            finally:
                await backend.close()
        finally:
            replica.stop()
    finally:
        primary.stop()


async def test_valkey_sentinel_url_and_its_clone(valkey_server: Server, prefix: str) -> None:
    """``valkey+sentinel://`` through valkey-py, and the clone the lease thread gets."""
    group = start_sentinels(valkey_server, wait_peers=False)
    try:
        backend = ValkeyBackend(group.url("valkey"), prefix=prefix)
        await backend.init()
        try:
            assert backend.server is not None
            assert backend.server.startswith("valkey")
            assert backend.runs is not None
            assert (await backend.runs.claim(_claim("vs", 1))).kind == "won"
        finally:
            await backend.close()
        other = backend.clone()
        assert other is not None
        assert _works_in_a_thread(other) == "won"
    finally:
        group.stop()


async def test_cluster_url_opens_a_cluster_client(redis_cluster: Cluster, prefix: str) -> None:
    hosts = ",".join(f"127.0.0.1:{port}" for port in redis_cluster.ports[:2])
    backend = resolve_backend(f"redis+cluster://{hosts}?prefix={prefix}")
    assert isinstance(backend, RedisBackend)
    await backend.init()
    try:
        assert backend.runs is not None
        for job in ("a", "b", "c", "d"):  # jobs on several nodes
            assert (await backend.runs.claim(_claim(job, 1))).kind == "won"
        conn = await backend.connection()
        assert conn.cluster
    finally:
        await backend.close()
    other = backend.clone()
    assert other is not None
    assert _works_in_a_thread(other) == "won"
