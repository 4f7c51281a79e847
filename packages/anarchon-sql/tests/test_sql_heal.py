"""Connections that heal on PostgreSQL: the call timeout frees a dead connection.

A call on a dead flow hits the backend's call timeout, its connection is shut
down and dropped from the pool, and the next call runs on a fresh connection.
The heal scenarios themselves (dead flows, a blackhole: ``HealScenarios``) run
in test_sql_contracts.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from anarchon.errors import BackendUnavailableError
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon_sql import PostgresBackend
from anarchon_sql.postgres._deadline import LIBPQ_DEFAULTS, with_libpq_defaults
from anarchon_testservers.postgres import PgServer

CALL_TIMEOUT_S = 1.5


def _dsn(server: PgServer, port: int) -> str:
    return (
        f"postgresql://postgres@127.0.0.1:{port}/{server.database}"
        f"?call_timeout={CALL_TIMEOUT_S}&pool_size=2"
    )


def test_a_call_on_a_dead_connection_times_out_and_frees_its_connection(
    pg_server: PgServer,
) -> None:
    """One pooled connection, its flow killed: the call fails after the timeout, the next works."""

    async def main(proxy: FaultProxy) -> None:
        backend = PostgresBackend(_dsn(pg_server, proxy.port).replace("pool_size=2", "pool_size=1"))
        try:
            await backend.init()
            assert backend.runs is not None
            await backend.runs.now_ms()
            assert proxy.kill_flows() >= 1
            t0 = time.monotonic()
            with pytest.raises(BackendUnavailableError, match=r"timeout after 1\.5 s"):
                await backend.runs.now_ms()
            assert time.monotonic() - t0 < CALL_TIMEOUT_S + 2.5
            # The only pool connection was dropped, not held: a fresh one answers.
            assert await asyncio.wait_for(backend.runs.now_ms(), 10) > 0
            assert backend.is_transient(BackendUnavailableError("x"))
        finally:
            await backend.close()

    with FaultProxy("127.0.0.1", pg_server.port) as proxy:
        asyncio.run(main(proxy))


def test_libpq_defaults_are_added_unless_given() -> None:
    added = with_libpq_defaults("postgresql://u@h/db")
    for key, value in LIBPQ_DEFAULTS.items():
        assert f"{key}={value}" in added
    mine = with_libpq_defaults("postgresql://u@h/db?connect_timeout=30&tcp_user_timeout=0")
    assert "connect_timeout=30" in mine
    assert "tcp_user_timeout=0" in mine
    assert "keepalives=1" in mine
