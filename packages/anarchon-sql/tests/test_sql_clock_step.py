"""A +40 s wall-clock step on one instance mid-run, on PostgreSQL: nothing changes.

Store time is the server's ``clock_timestamp()`` at the last sync plus
monotonic time, so the stepped instance runs no slot early, none twice, and
loses none (docs/concepts.md, "The store clock").
"""

from __future__ import annotations

import asyncio

import pytest
from anarchon.testing.scenarios.clock_step import check_wall_clock_step
from anarchon_sql import PostgresBackend

# Its point is timing or an injected fault: the scenario tier (docs/development.md).
pytestmark = pytest.mark.scenario


def test_a_wall_clock_step_changes_nothing_on_postgres(pg_dsn: str, prefix: str) -> None:
    asyncio.run(
        check_wall_clock_step(
            lambda: PostgresBackend(pg_dsn, table_prefix=prefix), every="200ms", seconds=4.0
        )
    )
