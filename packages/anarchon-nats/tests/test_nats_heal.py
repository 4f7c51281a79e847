"""Connections that heal on NATS (issue 18): established flows die silently.

The backend talks to nats-server through ``tests/support/flow_proxy.py``.
nats-py alone keeps a dead connection until its PING check gives up (minutes
at its defaults); the backend forces a reconnect after a few requests in a
row time out, and pings every 5 s, so the next slot runs within one
heartbeat plus one call timeout (plus the reconnect).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from anarchon import Backend
from anarchon_nats import NatsBackend
from anarchon_nats.backend import RECONNECT_AFTER_TIMEOUTS
from natstest_servers import NatsServer

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "support"))

from flow_proxy import FlowProxy
from heal_check import check_heals

CALL_TIMEOUT_S = 1.0


def test_silently_dead_connections_heal(nats_server: NatsServer) -> None:
    stream = f"H{uuid.uuid4().hex[:10].upper()}"
    prefix = f"h{uuid.uuid4().hex[:10]}."

    async def main() -> tuple[float, int]:
        proxy = await FlowProxy("127.0.0.1", nats_server.port).start()

        def make(port: int) -> Backend:
            return NatsBackend(
                f"nats://127.0.0.1:{port}",
                stream=stream,
                prefix=prefix,
                request_timeout=CALL_TIMEOUT_S,
            )

        try:
            healed = await check_heals(
                make,
                proxy,
                heartbeat_s=1.0,
                call_timeout_s=CALL_TIMEOUT_S * RECONNECT_AFTER_TIMEOUTS,
            )
            return healed, proxy.accepted
        finally:
            await proxy.close()

    healed, accepted = asyncio.run(main())
    assert accepted >= 2, "the backend never opened a new connection"
    print(f"nats healed in {healed:.2f} s")
