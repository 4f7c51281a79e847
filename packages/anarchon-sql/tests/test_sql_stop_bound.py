"""``stop()`` fits in a container's grace period: with the store down it returns within
``stop_grace`` plus one call timeout (docs/leases.md, "Stopping").

PostgreSQL goes down behind ``anarchon.testing.scenarios.proxy.FaultProxy`` (a blackhole:
connections are accepted, nothing is forwarded); SQLite is locked by another
connection holding an exclusive transaction. Both use
``anarchon.testing.scenarios.stop_bound.check_stop_bound``.
"""

from __future__ import annotations

import sqlite3
from urllib.parse import urlsplit, urlunsplit

import pytest
from anarchon import Scheduler
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon.testing.scenarios.stop_bound import check_stop_bound

# Its point is timing or an injected fault: the scenario tier (docs/development.md).
pytestmark = pytest.mark.scenario


def _lease_scheduler(url: str) -> Scheduler:
    return Scheduler(url, instance_id="stopper", lease="3s", heartbeat="1s", stop_grace="1s")


async def test_stop_with_postgres_down_returns_within_grace_plus_one_call(pg_dsn: str) -> None:
    parts = urlsplit(pg_dsn)
    assert parts.hostname is not None
    assert parts.port is not None
    with FaultProxy(parts.hostname, parts.port) as proxy:
        netloc = parts.netloc.rsplit(":", 1)[0] + f":{proxy.port}"
        url = urlunsplit(parts._replace(netloc=netloc))
        took = await check_stop_bound(
            _lease_scheduler(f"{url}?table_prefix=stopbound_"), proxy.blackhole
        )
    print(f"postgresql: stop() took {took:.2f} s with the store blackholed")


async def test_stop_with_sqlite_locked_returns_within_grace_plus_one_call(
    sqlite_path: str,
) -> None:
    locker = sqlite3.connect(sqlite_path, isolation_level=None, timeout=0.1)

    def lock() -> None:
        locker.execute("BEGIN EXCLUSIVE")  # every other connection now waits out busy

    try:
        took = await check_stop_bound(_lease_scheduler(f"sqlite:///{sqlite_path}"), lock)
    finally:
        locker.close()
    print(f"sqlite: stop() took {took:.2f} s with the database locked")
