"""Prefixes that nest are refused at ``init()`` (docs/backends/redis.md, "Keys").

Two applications, ``<base>`` with job ``a:b`` and ``<base>a:`` with job ``b``,
would share every key of that job and take each other's slots. The second to
start is refused with ``ANARCHON_INVALID_CONFIG``; the same prefix again, or
one that does not nest, starts.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from anarchon.errors import InvalidConfigError
from anarchon_redis import RedisBackend
from anarchon_redis._prefixes import PREFIXES_KEY
from anarchon_testservers.redis import Server


def _started(server: Server, prefix: str) -> None:
    async def main() -> None:
        backend = RedisBackend(server.url, prefix=prefix)
        try:
            await backend.init()
        finally:
            await backend.close()

    asyncio.run(main())


def test_a_prefix_nested_in_one_in_use_is_refused(redis_server: Server) -> None:
    base = f"np{uuid.uuid4().hex[:6]}:"
    _started(redis_server, base)
    _started(redis_server, base)  # the same application again
    _started(redis_server, f"{base[:-1]}x:")  # a sibling: neither starts with the other
    with pytest.raises(InvalidConfigError) as caught:
        _started(redis_server, f"{base}a:")
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    assert repr(base) in str(caught.value)
    with pytest.raises(InvalidConfigError):
        _started(redis_server, base[:-1])  # one that the prefix in use starts with
    client = redis.Redis.from_url(redis_server.redis_url, decode_responses=True)
    try:
        members = client.smembers(PREFIXES_KEY)
    finally:
        client.close()
    assert base in members
    assert f"{base}a:" not in members  # refused: taken out again
    assert base[:-1] not in members
