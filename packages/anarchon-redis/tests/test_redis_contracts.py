"""Every strategy passes ``BackendContract`` and ``FleetContract`` where it runs; ``lease`` passes ``LeaseContract``.

``lease``, ``stream-id`` and ``script`` on Redis 7 and Valkey; ``idmp`` on Redis 8.6.

Real servers (``conftest.py``); every test gets a fresh backend on a fresh key
prefix, with its own client opened in the test's event loop.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis.asyncio
from anarchon.backend import Backend
from anarchon.testing import (
    BackendContract,
    FleetContract,
    LeaseContract,
    LeaseModelContract,
)
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Cluster, Server


def _backend(server: Server, strategy: str, prefix: str) -> RedisBackendBase:
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    return cls(server.url, strategy=strategy, prefix=prefix)


class _Base(BackendContract, FleetContract):
    kind = "redis"
    strategy = "lease"

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


class _ClusterBase(BackendContract, FleetContract):
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
