"""``stop()`` with NATS down (blackholed by ``anarchon.testing.scenarios.proxy.FaultProxy``) returns
within ``stop_grace`` plus one call timeout (docs/leases.md, "Stopping")."""

from __future__ import annotations

import uuid

import pytest
from anarchon import Scheduler
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon.testing.scenarios.stop_bound import check_stop_bound
from anarchon_nats import NatsBackend
from anarchon_testservers.nats import NatsServer

# Its point is timing or an injected fault: the scenario tier (docs/development.md).
pytestmark = pytest.mark.scenario


async def test_stop_with_nats_down_returns_within_grace_plus_one_call(
    nats_server: NatsServer,
) -> None:
    with FaultProxy("127.0.0.1", nats_server.port) as proxy:
        backend = NatsBackend(
            f"nats://127.0.0.1:{proxy.port}",
            stream=f"S{uuid.uuid4().hex[:10].upper()}",
            prefix=f"s{uuid.uuid4().hex[:10]}.",
            request_timeout=1.0,
        )
        scheduler = Scheduler(backend, instance_id="stopper", stop_grace="1s")
        took = await check_stop_bound(scheduler, proxy.blackhole)
    print(f"nats: stop() took {took:.2f} s with the store blackholed")
