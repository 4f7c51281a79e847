"""``stop()`` with Redis down (blackholed by ``anarchon.testing.scenarios.proxy.FaultProxy``) returns
within ``stop_grace`` plus one call timeout (docs/leases.md, "Stopping")."""

from __future__ import annotations

import pytest
from anarchon import Scheduler
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon.testing.scenarios.stop_bound import check_stop_bound
from anarchon_testservers.redis import Server

# Its point is timing or an injected fault: the scenario tier (docs/development.md).
pytestmark = pytest.mark.scenario


async def test_stop_with_redis_down_returns_within_grace_plus_one_call(
    redis_server: Server,
) -> None:
    auth = f":{redis_server.password}@" if redis_server.password else ""
    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        scheduler = Scheduler(
            f"redis://{auth}127.0.0.1:{proxy.port}/0?socket_timeout=1",
            instance_id="stopper",
            lease="3s",
            heartbeat="1s",
            stop_grace="1s",
        )
        took = await check_stop_bound(scheduler, proxy.blackhole)
    print(f"redis: stop() took {took:.2f} s with the store blackholed")
