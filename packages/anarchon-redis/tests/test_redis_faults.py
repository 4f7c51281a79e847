"""``anarchon.testing.FaultProxy`` between a client and a real Redis: every mode does what it says.

(The fault scenarios, ``LeaseFaultScenarios`` and ``ClaimOnlyFaultScenarios``, run in
test_redis_contracts.py.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis.asyncio
from anarchon.errors import InvalidConfigError
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon_testservers.redis import Server


@pytest.fixture
def proxy(redis_server: Server) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        yield proxy


def _client(proxy: FaultProxy) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=None)


async def _ping(client: redis.asyncio.Redis, timeout_s: float) -> bool:
    try:
        return bool(await asyncio.wait_for(client.ping(), timeout_s))
    except asyncio.TimeoutError:
        return False


async def test_pass_forwards(proxy: FaultProxy) -> None:
    client = _client(proxy)
    try:
        assert await client.set("fault-proxy:k", "v")
        assert await client.get("fault-proxy:k") == b"v"
    finally:
        await client.aclose()


async def test_blackhole_holds_bytes_until_heal(proxy: FaultProxy) -> None:
    client = _client(proxy)
    try:
        assert await _ping(client, 5)
        proxy.blackhole()
        held = asyncio.ensure_future(client.incr("fault-proxy:held"))
        await asyncio.sleep(0.5)
        assert not held.done(), "a command went through the blackhole"
        fresh = _client(proxy)
        assert not await _ping(fresh, 0.5), "a new connection went through the blackhole"
        proxy.heal()
        assert await asyncio.wait_for(held, 5) >= 1, "the held command was not delivered on heal"
        await fresh.aclose()
        fresh = _client(proxy)
        assert await _ping(fresh, 5)
        await fresh.aclose()
    finally:
        await client.aclose()


async def test_dead_flows_stay_dead_while_new_ones_work(proxy: FaultProxy) -> None:
    old = _client(proxy)
    try:
        assert await _ping(old, 5)
        proxy.kill_flows()
        assert not await _ping(old, 0.5), "an established flow still forwards"
        new = _client(proxy)
        assert await _ping(new, 5), "a new connection does not work"
        await new.aclose()
        proxy.heal()
        probe = redis.asyncio.Redis(host="127.0.0.1", port=proxy.port)
        assert await _ping(probe, 5)
        await probe.aclose()
    finally:
        await old.aclose()


async def test_latency_delays_each_direction(proxy: FaultProxy) -> None:
    client = _client(proxy)
    try:
        assert await _ping(client, 5)
        proxy.latency(200)
        started = time.monotonic()
        assert await _ping(client, 10)
        # 200 ms each way: a round trip takes at least 400 ms (a lower bound, not a benchmark).
        assert time.monotonic() - started >= 0.39
    finally:
        await client.aclose()


def test_bad_mode_is_refused(proxy: FaultProxy) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        proxy.set_mode("cut")
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"
