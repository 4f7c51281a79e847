"""Separate OS processes on one store: exactly once per slot (``anarchon.testing.fleet``).

The ``kill -9`` takeover is the shipped scenario ``anarchon.testing.scenarios.faults.kill9_takeover``
(test_sql_faults.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from anarchon.backend import Backend
from anarchon.testing.fleet import run_fleet
from anarchon_sql import PostgresBackend, SqliteBackend

# (processes, window): a small race in the gate, the 8-process fleet in the scenario tier
FLEETS = [
    pytest.param(3, 5.0, id="3-processes"),
    pytest.param(8, 10.0, id="8-processes", marks=pytest.mark.scenario),
]


def _fleet(url: str, reader: Backend, tmp_path: Path, processes: int, window_s: float) -> None:
    """``processes`` processes, one 200 ms job, ``window_s`` together: every slot ran exactly once.

    Exactly once and none missed, from the processes' records and from history
    (see ``anarchon.testing.fleet``); leases on, so every run is attempt 1.
    """
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=processes,
        window_s=window_s,
        reader=reader,
        scheduler_options={"lease": "5s", "heartbeat": "1s"},
        job_options={"overlap": True},
    )
    print(result.summary())


@pytest.mark.slow
@pytest.mark.parametrize(("processes", "window_s"), FLEETS)
def test_processes_postgres(pg_dsn: str, tmp_path: Path, processes: int, window_s: float) -> None:
    url = f"{pg_dsn}?table_prefix=fleet{processes}_"
    _fleet(url, PostgresBackend.from_url(url), tmp_path, processes, window_s)


@pytest.mark.slow
@pytest.mark.parametrize(("processes", "window_s"), FLEETS)
def test_processes_sqlite(tmp_path: Path, processes: int, window_s: float) -> None:
    path = tmp_path / "fleet.db"
    url = f"sqlite:///{path}"
    _fleet(url, SqliteBackend(str(path)), tmp_path, processes, window_s)
