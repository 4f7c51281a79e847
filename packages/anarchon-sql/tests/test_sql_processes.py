"""Separate OS processes on one store: exactly once per slot (``anarchon.testing.fleet``).

The ``kill -9`` takeover is the shipped scenario ``anarchon.testing.faults.kill9_takeover``
(test_sql_faults.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from anarchon.backend import Backend
from anarchon.testing.fleet import run_fleet
from anarchon_sql import PostgresBackend, SqliteBackend


def _fleet(url: str, reader: Backend, tmp_path: Path) -> None:
    """8 processes, one 200 ms job, >= 10 s together: every slot ran exactly once.

    Exactly once and none missed, from the processes' records and from history
    (see ``anarchon.testing.fleet``); leases on, so every run is attempt 1.
    """
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=8,
        window_s=10.0,
        reader=reader,
        scheduler_options={"lease": "5s", "heartbeat": "1s"},
        job_options={"overlap": True},
    )
    print(result.summary())


@pytest.mark.slow
def test_eight_processes_postgres(pg_dsn: str, tmp_path: Path) -> None:
    url = f"{pg_dsn}?table_prefix=fleet_"
    _fleet(url, PostgresBackend.from_url(url), tmp_path)


@pytest.mark.slow
def test_eight_processes_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    url = f"sqlite:///{path}"
    _fleet(url, SqliteBackend(str(path)), tmp_path)
