"""Every recognised client passes a contract smoke run on a real server.

- Valkey GLIDE: ``GlideClient`` (Valkey) and ``GlideClusterClient`` (the
  3-node Redis Cluster), used through ``custom_command``;
- any object with an async ``execute_command(*args)``: a tiny adapter over a
  real redis-py connection (no ``pipeline()``: commands go one by one).

The smoke run: a 20-claimer race with exactly one winner per slot, a repeated
claim, a manual run, a stored result and the merged history, with ``lease``
(plus a lease hand-over through ``runs``) and with ``script``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio
from anarchon.types import ClaimInput, RunClaim, StoredResult
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Cluster, Server
from glide import (
    GlideClient,
    GlideClientConfiguration,
    GlideClusterClient,
    GlideClusterClientConfiguration,
    NodeAddress,
)


class RawCommandClient:
    """The smallest client anarchon-redis accepts: one async ``execute_command(*args)``."""

    def __init__(self, connection: redis.asyncio.Redis) -> None:
        self._connection = connection

    async def execute_command(self, *args: Any) -> Any:
        """Send one raw command and return the server's reply."""
        return await self._connection.execute_command(*args)


async def smoke(backend: RedisBackendBase) -> None:
    """The contract smoke run (see the module docstring)."""
    await backend.init()
    try:
        job = f"smoke-{uuid.uuid4().hex[:8]}"
        await backend.prepare_job(job, 100)
        now = await backend.now_ms()
        slots = [now - 10_000 + i * 1000 for i in range(5)]
        for slot in slots:
            claims = [ClaimInput(job, slot, uuid.uuid4().hex, f"i{n}") for n in range(20)]
            won = await asyncio.gather(*(backend.claim(c) for c in claims))
            assert sum(won) == 1, f"slot {slot}: {sum(won)} winners"
            winner = claims[won.index(True)]
            assert await backend.claim(winner), "a repeated claim must win again"
            result = StoredResult(
                slot, winner.token, winner.instance_id, "ok", slot, slot + 5, None, 1
            )
            await backend.save_result(job, result, 100)
        manual = ClaimInput(job, now, uuid.uuid4().hex, "manual-i")
        await backend.record_manual_run(manual)
        records = await backend.history(job, 50)
        assert sorted(r.slot for r in records if not r.manual) == slots
        assert all(r.status == "ok" for r in records if not r.manual)
        assert [r.instance_id for r in records if r.manual] == ["manual-i"]
        if backend.runs is not None:
            slot = now - 1000
            first = await backend.runs.claim(RunClaim(job, slot, "t-a", "a", 60_000))
            second = await backend.runs.claim(RunClaim(job, slot, "t-b", "b", 60_000))
            assert (first.kind, second.kind) == ("won", "running")
            assert await backend.runs.finish(job, slot, "t-a", "ok")
    finally:
        await backend.close()


def _run(
    make: Callable[[], Awaitable[tuple[RedisBackendBase, Callable[[], Awaitable[Any]]]]],
) -> None:
    async def main() -> None:
        backend, close = await make()
        try:
            await smoke(backend)
        finally:
            await close()

    asyncio.run(main())


@pytest.mark.parametrize("strategy", ["lease", "script"])
def test_glide_client(valkey_server: Server, strategy: str) -> None:
    async def make() -> tuple[RedisBackendBase, Callable[[], Awaitable[Any]]]:
        config = GlideClientConfiguration([NodeAddress("127.0.0.1", valkey_server.port)])
        client = await GlideClient.create(config)
        backend = ValkeyBackend(client, strategy=strategy, prefix=f"g{uuid.uuid4().hex[:8]}:")
        assert "GlideClient" in backend.describe()
        return backend, client.close

    _run(make)


@pytest.mark.parametrize("strategy", ["lease", "script"])
def test_glide_cluster_client(redis_cluster: Cluster, strategy: str) -> None:
    async def make() -> tuple[RedisBackendBase, Callable[[], Awaitable[Any]]]:
        config = GlideClusterClientConfiguration([NodeAddress("127.0.0.1", redis_cluster.ports[0])])
        client = await GlideClusterClient.create(config)
        backend = RedisBackend(client, strategy=strategy, prefix=f"g{uuid.uuid4().hex[:8]}:")
        assert "GlideClusterClient" in backend.describe()
        return backend, client.close

    _run(make)


def test_glide_client_with_idmp_on_redis_86(redis86_server: Server) -> None:
    async def make() -> tuple[RedisBackendBase, Callable[[], Awaitable[Any]]]:
        config = GlideClientConfiguration([NodeAddress("127.0.0.1", redis86_server.port)])
        client = await GlideClient.create(config)
        return RedisBackend(
            client, strategy="idmp", prefix=f"g{uuid.uuid4().hex[:8]}:"
        ), client.close

    _run(make)


@pytest.mark.parametrize("strategy", ["lease", "stream-id", "script"])
def test_any_object_with_an_async_execute_command(redis_server: Server, strategy: str) -> None:
    async def make() -> tuple[RedisBackendBase, Callable[[], Awaitable[Any]]]:
        connection = redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port)
        backend = RedisBackend(
            RawCommandClient(connection), strategy=strategy, prefix=f"r{uuid.uuid4().hex[:8]}:"
        )
        assert "RawCommandClient" in backend.describe()
        return backend, connection.aclose

    _run(make)
