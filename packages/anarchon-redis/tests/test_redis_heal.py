"""Connections that heal (issue 18): established flows die silently, new ones work.

The backend talks to the server through ``tests/support/flow_proxy.py``; a
call on a dead flow times out after ``socket_timeout`` and redis-py's one
retry runs it on a fresh connection, so the next slot runs within one
heartbeat plus one call timeout.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from anarchon import Backend
from anarchon_redis import RedisBackend
from redis_servers import Server

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "support"))

from flow_proxy import FlowProxy
from heal_check import check_heals

CALL_TIMEOUT_S = 1.5


def test_silently_dead_connections_heal(redis_server: Server) -> None:
    async def main() -> float:
        proxy = await FlowProxy("127.0.0.1", redis_server.port).start()

        def make(port: int) -> Backend:
            auth = f":{redis_server.password}@" if redis_server.password else ""
            return RedisBackend(f"redis://{auth}127.0.0.1:{port}/0?socket_timeout={CALL_TIMEOUT_S}")

        try:
            return await check_heals(make, proxy, heartbeat_s=1.0, call_timeout_s=CALL_TIMEOUT_S)
        finally:
            await proxy.close()

    healed = asyncio.run(main())
    print(f"redis healed in {healed:.2f} s")
