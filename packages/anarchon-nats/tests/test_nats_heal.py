"""Connections that heal on NATS: the backend's forced reconnect, and when it must not happen.

nats-py alone keeps a dead connection until its PING check gives up (minutes
at its defaults); the backend forces a reconnect after a few requests in a
row time out, and pings every 5 s. The heal scenarios themselves (dead flows,
a blackhole: ``HealScenarios``) run in test_nats_contract.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from anarchon_nats import NatsBackend
from anarchon_nats.backend import RECONNECT_AFTER_TIMEOUTS
from anarchon_testservers.nats import NatsServer

CALL_TIMEOUT_S = 1.0


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
