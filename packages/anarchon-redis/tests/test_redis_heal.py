"""Connections that heal (issue 18), through ``anarchon.testing.scenarios.proxy.FaultProxy``.

- Established flows die silently while new ones work: a call on a dead flow
  times out after ``socket_timeout`` and redis-py's one retry runs it on a
  fresh connection.
- A blackhole (nothing forwarded on old or new connections), then a heal.

Either way the next slot runs within one heartbeat plus one call timeout of
the store being reachable again, and finished runs are stored.
"""

from __future__ import annotations

import asyncio

import pytest
from anarchon import Backend
from anarchon.testing.scenarios.heal import check_heals
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import Server

CALL_TIMEOUT_S = 1.5


@pytest.mark.scenario
@pytest.mark.parametrize("fault", ["dead_flows", "blackhole"])
def test_connections_heal(redis_server: Server, fault: str) -> None:
    def make(port: int) -> Backend:
        auth = f":{redis_server.password}@" if redis_server.password else ""
        return RedisBackend(f"redis://{auth}127.0.0.1:{port}/0?socket_timeout={CALL_TIMEOUT_S}")

    async def main(proxy: FaultProxy) -> float:
        result = await check_heals(
            make, proxy, fault=fault, heartbeat_s=1.0, call_timeout_s=CALL_TIMEOUT_S
        )
        print(f"redis {fault}: healed in {result.recovered_s:.2f} s, {result.slots_lost} lost")
        return result.recovered_s

    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        asyncio.run(main(proxy))
