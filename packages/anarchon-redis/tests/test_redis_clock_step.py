"""A +40 s wall-clock step on one instance mid-run, on Redis (lease): nothing changes.

Store time is Redis ``TIME`` at the last sync plus monotonic time, so the
stepped instance runs no slot early, none twice, and loses none
(docs/concepts.md, "The store clock").
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from anarchon.testing.scenarios.clock_step import check_wall_clock_step
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import Server

# Its point is timing or an injected fault: the scenario tier (docs/development.md).
pytestmark = pytest.mark.scenario


def test_a_wall_clock_step_changes_nothing_on_redis(redis_server: Server) -> None:
    prefix = f"step{uuid.uuid4().hex[:8]}:"
    asyncio.run(
        check_wall_clock_step(
            lambda: RedisBackend(redis_server.url, prefix=prefix), every="200ms", seconds=4.0
        )
    )
