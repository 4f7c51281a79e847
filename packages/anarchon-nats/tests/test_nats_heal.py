"""Connections that heal on NATS (issue 18), through ``anarchon.testing.scenarios.proxy.FaultProxy``.

- Established flows die silently while new ones work. nats-py alone keeps a
  dead connection until its PING check gives up (minutes at its defaults);
  the backend forces a reconnect after a few requests in a row time out, and
  pings every 5 s.
- A blackhole (nothing forwarded on old or new connections), then a heal.

Either way the next slot runs within one heartbeat plus one call timeout
(the forced reconnect's timeouts) of the store being reachable again.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from anarchon import Backend
from anarchon.testing.scenarios.heal import check_heals
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon_nats import NatsBackend
from anarchon_nats.backend import RECONNECT_AFTER_TIMEOUTS
from anarchon_testservers.nats import NatsServer

CALL_TIMEOUT_S = 1.0


@pytest.mark.scenario
@pytest.mark.parametrize("fault", ["dead_flows", "blackhole"])
def test_connections_heal(nats_server: NatsServer, fault: str) -> None:
    stream = f"H{uuid.uuid4().hex[:10].upper()}"
    prefix = f"h{uuid.uuid4().hex[:10]}."

    def make(port: int) -> Backend:
        return NatsBackend(
            f"nats://127.0.0.1:{port}",
            stream=stream,
            prefix=prefix,
            request_timeout=CALL_TIMEOUT_S,
        )

    async def main(proxy: FaultProxy) -> None:
        result = await check_heals(
            make,
            proxy,
            fault=fault,
            heartbeat_s=1.0,
            call_timeout_s=CALL_TIMEOUT_S * RECONNECT_AFTER_TIMEOUTS,
        )
        print(f"nats {fault}: healed in {result.recovered_s:.2f} s, {result.slots_lost} lost")
        if fault == "dead_flows":
            assert result.reconnected, "the backend never opened a new connection"

    with FaultProxy("127.0.0.1", nats_server.port) as proxy:
        asyncio.run(main(proxy))


def test_timeouts_while_answers_arrive_force_no_reconnect(nats_server: NatsServer) -> None:
    """Slowness is not a dead connection: no forced reconnect while answers still arrive."""

    async def main() -> None:
        backend = NatsBackend(
            f"nats://127.0.0.1:{nats_server.port}",
            stream=f"R{uuid.uuid4().hex[:10].upper()}",
            prefix=f"r{uuid.uuid4().hex[:10]}.",
            request_timeout=CALL_TIMEOUT_S,
        )
        await backend.init()
        try:
            nc = await backend._client()
            backend._pipeline.heard_at = time.monotonic()  # an answer came in just now
            for _ in range(RECONNECT_AFTER_TIMEOUTS * 3):
                backend._no_answer("claim")
            assert not backend._reconnects
            assert nc.is_connected
            backend._pipeline.heard_at = float("-inf")  # nothing heard for a whole timeout
            for _ in range(RECONNECT_AFTER_TIMEOUTS):
                backend._no_answer("claim")
            assert backend._reconnects, "a silent connection must still be dropped"
        finally:
            await backend.close()

    asyncio.run(main())
