"""Every strategy passes ``BackendContract``, ``FleetContract`` and ``MembershipContract`` where it runs; ``lease`` passes ``LeaseContract``.

The shipped scenarios (``ScenarioContract``) run on redis-server: ``lease`` and
``stream-id`` where both apply, ``stream-id`` for the claim-only ``kill -9``.

``lease``, ``stream-id`` and ``script`` on Redis 7 and Valkey; ``idmp`` on Redis 8.6.

Real servers (``conftest.py``); every test gets a fresh backend on a fresh key
prefix, with its own client opened in the test's event loop.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from anarchon import Scheduler
from anarchon.backend import Backend
from anarchon.testing import (
    BackendContract,
    FleetContract,
    LeaseContract,
    LeaseModelContract,
    MembershipContract,
)
from anarchon.testing.contracts.foreign import ForeignDataContract
from anarchon.testing.contracts.scenarios import ScenarioContract
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Cluster, Server


def _backend(server: Server, strategy: str, prefix: str) -> RedisBackendBase:
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    return cls(server.url, strategy=strategy, prefix=prefix)


async def _write_garbage(backend: Backend, job: str, slot: int) -> list[str]:
    """Garbage in every key the strategy owns for ``job``, and in the shared hashes."""
    assert isinstance(backend, RedisBackendBase)
    conn = await backend.connection()
    places: list[str] = []
    runtime: Any = backend._runtime
    legacy = runtime.legacy_keys(job) if hasattr(runtime, "legacy_keys") else ()
    for key, kind in runtime.key_types(job).items():
        if key in legacy:  # read only by the upgrade in prepare_job()
            continue
        if kind == "hash":
            await conn.execute("HSET", key, str(slot), "{bad", "~act", str(slot))
            places.append(f"{key}[{slot}]")
        elif kind == "stream":
            await conn.execute("XADD", key, "*", "slot", "1e400", "not", "a claim")
            places.append(key)
        elif kind == "zset":
            await conn.execute("ZADD", key, slot, '{"slot":1e400,"token":"t","status":"ok"}')
            places.append(key)
        elif kind == "string":
            await conn.execute("SET", key, "1e400")
            places.append(key)
    controls, fleet = backend.prefix + "controls", backend.prefix + "fleet"
    members = backend.prefix + "members"
    bad, big = f"{job}~bad", f"{job}~big"
    await conn.execute("HSET", controls, bad, "{bad", big, '{"p":1e400,"u":null}')
    await conn.execute("HSET", fleet, f"{bad}\ni-9", "1e400")
    await conn.execute("HSET", members, "i-8", "{bad", "i-9", '{"r":1,"seen":1e400,"exp":1e400}')
    return [
        *places,
        f"{controls}[{bad}]",
        f"{controls}[{big}]",
        f"{fleet}[{bad}\ni-9]",
        f"{members}[i-8]",
        f"{members}[i-9]",
    ]


class _Base(BackendContract, FleetContract, MembershipContract, ForeignDataContract):
    kind = "redis"
    strategy = "lease"

    async def write_garbage(self, backend: Backend, job: str, slot: int) -> list[str]:
        """Garbage in every key of the strategy."""
        return await _write_garbage(backend, job, slot)

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        """New clients of the same server and prefix, one per thread."""
        assert isinstance(backend, RedisBackendBase)
        assert backend.url is not None
        cls = type(backend)
        return [
            cls(backend.url, strategy=self.strategy, prefix=backend.prefix) for _ in range(count)
        ]

    @pytest.fixture
    def backend(self, request: pytest.FixtureRequest) -> Backend:
        server: Server = request.getfixturevalue(f"{self.kind}_server")
        return _backend(server, self.strategy, f"c{uuid.uuid4().hex[:10]}:")


class TestRedisLease(_Base, LeaseContract):
    """Redis, ``lease``: both suites."""


class TestRedisLeaseModel(LeaseModelContract):
    """Redis ``lease`` (Lua) answers every lease operation like the reference model."""

    @pytest.fixture
    def backend(self, redis_server: Server) -> Backend:
        return _backend(redis_server, "lease", f"m{uuid.uuid4().hex[:10]}:")


class TestRedisSentinelLease(_Base, LeaseContract):
    """``redis+sentinel://`` (a primary, a replica, 3 Sentinels), ``durability="replicated"``."""

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        """New clients through the same Sentinels, with the same durability."""
        assert isinstance(backend, RedisBackendBase)
        clones = [backend.clone() for _ in range(count)]
        return [c for c in clones if c is not None]

    @pytest.fixture
    def backend(self, request: pytest.FixtureRequest) -> Backend:
        group = request.getfixturevalue("redis_sentinel")
        return RedisBackend(
            group.sentinels.url(),
            prefix=f"s{uuid.uuid4().hex[:10]}:",
            durability="replicated",
            durability_timeout=5000,  # answers at once when confirmed; never flaky under load
        )


class TestRedisStreamId(_Base):
    """Redis, ``stream-id``: the backend suite (no leases)."""

    strategy = "stream-id"


class TestValkeyLease(_Base, LeaseContract):
    """Valkey, ``lease``: both suites."""

    kind = "valkey"


class TestValkeyStreamId(_Base):
    """Valkey, ``stream-id``: the backend suite (no leases)."""

    kind = "valkey"
    strategy = "stream-id"


class TestRedisScript(_Base):
    """Redis 7, ``script``: the backend suite (no leases)."""

    strategy = "script"


class TestValkeyScript(_Base):
    """Valkey, ``script``: the backend suite (no leases)."""

    kind = "valkey"
    strategy = "script"


class TestRedis86Idmp(_Base):
    """Redis 8.6, ``idmp``: the backend suite (no leases)."""

    kind = "redis86"
    strategy = "idmp"


class _ClusterBase(BackendContract, FleetContract, MembershipContract):
    """A real 3-node Redis Cluster through ``redis.asyncio.RedisCluster`` (a client we pass in)."""

    strategy = "lease"

    def _client(self, cluster: Cluster) -> Any:
        return redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.ports[0])

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        """A new cluster client per thread, same prefix."""
        assert isinstance(backend, RedisBackendBase)
        return [
            RedisBackend(self._client(self.cluster), strategy=self.strategy, prefix=backend.prefix)
            for _ in range(count)
        ]

    @pytest.fixture
    def backend(self, request: pytest.FixtureRequest) -> Backend:
        self.cluster: Cluster = request.getfixturevalue("redis_cluster")
        return RedisBackend(
            self._client(self.cluster), strategy=self.strategy, prefix=f"c{uuid.uuid4().hex[:10]}:"
        )


class TestClusterLease(_ClusterBase, LeaseContract):
    """Redis Cluster, ``lease``: both suites."""


class TestClusterScript(_ClusterBase):
    """Redis Cluster, ``script``: the backend suite."""

    strategy = "script"


_SCENARIO = pytest.mark.scenario


class TestRedisScenarios(ScenarioContract):
    """The shipped scenarios on redis-server; a store is a strategy (or the server itself)."""

    one_off_stores = (
        pytest.param("lease", marks=_SCENARIO),
        pytest.param("stream-id", marks=_SCENARIO),
    )
    retry_kill9_stores = ("lease",)
    control_stores = one_off_stores
    takeover_stores = ("lease",)
    handover_stores = ("lease",)
    outlive_stores = ("lease",)
    sigstop_stores = ("lease",)
    claim_only_stores = ("stream-id",)
    heal_stores = ("redis",)
    stop_bound_stores = ("redis",)
    clock_step_stores = ("redis",)

    def _server(self, request: pytest.FixtureRequest) -> Server:
        server: Server = request.getfixturevalue("redis_server")
        return server

    def _auth(self, request: pytest.FixtureRequest) -> str:
        password = self._server(request).password
        return f":{password}@" if password else ""

    def scenario_url(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path, tag: str
    ) -> str:
        server = self._server(request)
        return f"{server.url}?strategy={store}&prefix={tag}{uuid.uuid4().hex[:6]}:"

    def store_address(self, request: pytest.FixtureRequest, store: str) -> tuple[str, int]:
        return "127.0.0.1", self._server(request).port

    def proxied_backend(self, request: pytest.FixtureRequest, store: str, port: int) -> Backend:
        timeout = self.heal_call_timeout_s
        auth = self._auth(request)
        return RedisBackend(f"redis://{auth}127.0.0.1:{port}/0?socket_timeout={timeout}")

    def stop_bound_scheduler(
        self, request: pytest.FixtureRequest, store: str, port: int
    ) -> Scheduler:
        return Scheduler(
            f"redis://{self._auth(request)}127.0.0.1:{port}/0?socket_timeout=1",
            instance_id="stopper",
            lease="3s",
            heartbeat="1s",
            stop_grace="1s",
        )

    def clock_step_backend(self, request: pytest.FixtureRequest, store: str) -> Backend:
        return RedisBackend(self._server(request).url, prefix=request.getfixturevalue("prefix"))
