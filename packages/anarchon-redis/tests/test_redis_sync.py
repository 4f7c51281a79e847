"""The sync facade (``SyncScheduler``) on Redis, from plain threads: no "attached to a different loop"."""

from __future__ import annotations

import uuid

import pytest
from anarchon.backend import Backend
from anarchon.testing import SyncFacadeContract
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import Server


class TestRedisSync(SyncFacadeContract):
    @pytest.fixture
    def backend(self, redis_server: Server) -> Backend:
        return RedisBackend(redis_server.url, prefix=f"s{uuid.uuid4().hex[:10]}:")
