"""Every strategy passes ``BackendContract``, ``FleetContract`` and ``MembershipContract`` where it runs; ``lease`` passes ``LeaseContract``.

The shipped scenarios (``ScenarioContract``) run on redis-server: ``lease`` and
``stream-id`` where both apply, ``stream-id`` for the claim-only ``kill -9``.

``lease``, ``stream-id`` and ``script`` on Redis 7 and Valkey; ``idmp`` on Redis 8.6.

Real servers (``conftest.py``); every test gets a fresh backend on a fresh key
prefix, with its own client opened in the test's event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

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
from anarchon.testing.contracts.foreign import HISTORY_SIZE, ForeignDataContract
from anarchon.testing.contracts.scenarios import ScenarioContract
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Cluster, Server


def _backend(server: Server, strategy: str, prefix: str) -> RedisBackendBase:
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    return cls(server.url, strategy=strategy, prefix=prefix)


LEASE_PLACES = (
    "run state",
    "run state numbers",
    "~act",
    "~n",
    "~ttl",
    "~keep",
    "~st",
    "runs",
    "results",
    "legacy active set",
    "controls",
    "fleet",
    "members",
    "format",
)
"""What ``lease`` keeps: the ``state`` hash's slots and bookkeeping fields, streams, shared keys."""

STREAM_ID_PLACES = ("runs", "manual", "results", "controls", "fleet", "members", "format")
DEDUPE_PLACES = (
    "runs",
    "manual",
    "results",
    "trimmed",
    "controls",
    "fleet",
    "members",
    "format",
)
"""What ``script`` and ``idmp`` keep."""

_NOT_AT_ONCE = {"format", "run state numbers", "~st", "legacy active set"}
"""Places left out of ``write_garbage()``: they break ``init()``, or another place hides them."""

_DUE = 720_719
"""A ``~n`` after which the next write trims at once: 720720 = lcm(1..16), any ``every``."""


async def _write_garbage_at(backend: Backend, job: str, slot: int, place: str) -> list[str]:
    """Garbage in one place the strategy owns for ``job`` (or in a shared key); its names."""
    assert isinstance(backend, RedisBackendBase)
    conn = await backend.connection()
    runtime: Any = backend._runtime
    prefix = backend.prefix
    keys: tuple[str, ...] = runtime.keys(job)
    if place in ("controls", "fleet"):
        bad, big = f"{job}~bad", f"{job}~big"
        if place == "controls":
            key = prefix + "controls"
            await conn.execute("HSET", key, bad, "{bad", big, '{"p":1e400,"u":null}')
            return [f"{key}[{bad}]", f"{key}[{big}]"]
        key = prefix + "fleet"
        await conn.execute("HSET", key, f"{bad}\ni-9", "1e400")
        return [f"{key}[{bad}\ni-9]"]
    if place == "members":
        key = prefix + "members"
        await conn.execute("HSET", key, "i-8", "{bad", "i-9", '{"r":1,"seen":1e400,"exp":1e400}')
        return [f"{key}[i-8]", f"{key}[i-9]"]
    if place == "format":
        await conn.execute("SET", prefix + "format", "{bad")
        return [prefix + "format"]
    if place == "results":
        key = keys[2]
        await conn.execute("ZADD", key, slot, '{"slot":1e400,"token":"t","status":"ok"}')
        return [key]
    if place == "runs" and backend.strategy.name == "stream-id":  # the entry ID is the slot
        await conn.execute("XADD", keys[0], f"{slot + 1}-0", "slot", "x", "not", "a claim")
        return [keys[0]]
    if place in ("runs", "manual"):  # lease keys: (state, runs, results)
        key = keys[1] if place == "manual" or backend.strategy.name == "lease" else keys[0]
        await conn.execute("XADD", key, "*", "slot", "1e400", "not", "a claim")
        return [key]
    if place == "trimmed":
        await conn.execute("SET", keys[3], "{bad")
        return [keys[3]]
    if place == "legacy active set":
        active = runtime.legacy_keys(job)[0]
        await conn.execute("SADD", active, "x")
        return [active]
    state = keys[0]
    if place in ("run state", "run state numbers"):
        value = "{bad"
        if place == "run state numbers":  # cjson reads 1e400 as inf
            value = '{"a":1,"t":"t","s":"running","r":"i-9","l":1e400,"b":0,"m":1,"x":0}'
        await conn.execute("HSET", state, str(slot), value, "~act", str(slot))
        return [f"{state}[{slot}]"]
    bookkeeping = {"~act": "x,y", "~n": "1e400", "~ttl": "{bad", "~keep": "1e400"}
    if place in bookkeeping:
        await conn.execute("HSET", state, place, bookkeeping[place])
        return [f"{state}[{place}]"]
    assert place == "~st", place
    # ~st is read only when state is to be trimmed: many old runs, and a due write.
    finished = await conn.execute("HGET", state, str(slot))
    assert finished is not None
    olds = [(str(slot - 1000 * n), finished) for n in range(1, 4 * HISTORY_SIZE)]
    await conn.execute(
        "HSET", state, *[v for pair in olds for v in pair], "~n", _DUE, "~st", "1e400"
    )
    return [f"{state}[~st]"]


async def _write_garbage(
    backend: Backend, job: str, slot: int, places: tuple[str, ...]
) -> list[str]:
    """Garbage in every place of the strategy but those that break ``init()`` or each other."""
    names: list[str] = []
    for place in places:
        if place not in _NOT_AT_ONCE:
            names += await _write_garbage_at(backend, job, slot, place)
    return names


class _Base(BackendContract, FleetContract, MembershipContract, ForeignDataContract):
    kind = "redis"
    strategy = "lease"
    garbage_places: ClassVar[Sequence[str]] = LEASE_PLACES

    async def write_garbage(self, backend: Backend, job: str, slot: int) -> list[str]:
        """Garbage in every key of the strategy."""
        return await _write_garbage(backend, job, slot, tuple(self.garbage_places))

    async def write_garbage_at(
        self, backend: Backend, job: str, slot: int, place: str
    ) -> list[str]:
        """Garbage in one key or field of the strategy."""
        return await _write_garbage_at(backend, job, slot, place)

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
    garbage_places = STREAM_ID_PLACES


class TestValkeyLease(_Base, LeaseContract):
    """Valkey, ``lease``: both suites."""

    kind = "valkey"


class TestValkeyStreamId(_Base):
    """Valkey, ``stream-id``: the backend suite (no leases)."""

    kind = "valkey"
    strategy = "stream-id"
    garbage_places = STREAM_ID_PLACES


class TestRedisScript(_Base):
    """Redis 7, ``script``: the backend suite (no leases)."""

    strategy = "script"
    garbage_places = DEDUPE_PLACES


class TestValkeyScript(_Base):
    """Valkey, ``script``: the backend suite (no leases)."""

    kind = "valkey"
    strategy = "script"
    garbage_places = DEDUPE_PLACES


class TestRedis86Idmp(_Base):
    """Redis 8.6, ``idmp``: the backend suite (no leases)."""

    kind = "redis86"
    strategy = "idmp"
    garbage_places = DEDUPE_PLACES


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
