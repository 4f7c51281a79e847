"""Membership's key on a real Redis and Valkey: what a refresh stores, prunes and leaves alone.

The contract (``MembershipContract`` in test_redis_contracts.py) checks the
answers; here, the hash itself: one field per instance in ``<prefix>members``,
expired fields deleted by the next refresh (not by a read), a field anarchon
did not write left in place and reported once, and the key of another type
refused with ``ANARCHON_FOREIGN_DATA`` naming it.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from anarchon.errors import ForeignDataError
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Server


def _backend(server: Server, prefix: str) -> RedisBackendBase:
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    return cls(server.url, prefix=prefix)


def test_a_refresh_writes_one_field_and_prunes_expired_ones(server: Server, prefix: str) -> None:
    async def main() -> None:
        backend = _backend(server, prefix)
        await backend.init()
        try:
            conn = await backend.connection()
            key = prefix + "members"
            await backend.refresh_member("gone", "r", 1_000)
            answer = await backend.refresh_member("web-1", "digest", 60_000)
            raw = await conn.execute("HGET", key, "web-1")
            stored = json.loads(raw)
            assert stored == {"r": "digest", "seen": answer[-1].seen_at, "exp": stored["exp"]}
            assert stored["exp"] - stored["seen"] == 60_000
            await asyncio.sleep(2.5)
            assert [m.instance_id for m in await backend.members()] == ["web-1"]
            assert await conn.execute("HEXISTS", key, "gone") == 1  # a read deletes nothing
            await backend.refresh_member("web-1", "digest", 60_000)
            assert await conn.execute("HEXISTS", key, "gone") == 0
            await backend.leave_member("web-1")
            assert await conn.execute("EXISTS", key) == 0
        finally:
            await backend.close()

    asyncio.run(main())


def test_a_foreign_field_is_left_alone_and_reported_once(
    server: Server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    async def main() -> None:
        backend = _backend(server, prefix)
        await backend.init()
        try:
            conn = await backend.connection()
            key = prefix + "members"
            await conn.execute("HSET", key, "odd", '{"exp": "soon"}', "odder", "[]")
            for _ in range(3):
                answer = await backend.refresh_member("web-1", "r", 60_000)
                assert [m.instance_id for m in answer] == ["web-1"]
            assert [m.instance_id for m in await backend.members()] == ["web-1"]
            assert await conn.execute("HGET", key, "odd") is not None
            reported = [
                str(r.__dict__["foreign_key"])
                for r in caplog.records
                if r.__dict__.get("foreign_key") is not None
            ]
            assert sorted(reported) == [f"{key}[odd]", f"{key}[odder]"]
        finally:
            await backend.close()

    asyncio.run(main())


def test_a_members_key_of_another_type_is_foreign_data(server: Server, prefix: str) -> None:
    async def main() -> None:
        backend = _backend(server, prefix)
        await backend.init()
        try:
            conn = await backend.connection()
            key = prefix + "members"
            await conn.execute("SET", key, "not a hash")
            calls = [
                lambda: backend.refresh_member("web-1", "r", 60_000),
                backend.members,
                lambda: backend.leave_member("web-1"),
            ]
            for call in calls:
                with pytest.raises(ForeignDataError) as raised:
                    await call()
                assert raised.value.key == key
        finally:
            await backend.close()

    asyncio.run(main())
