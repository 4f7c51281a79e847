"""Real processes on PostgreSQL and SQLite: a one-off run declared by 4 processes runs once,
and a ``kill -9`` during a retry's backoff is taken over (docs/one-off-runs.md, docs/retries.md)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.scenarios.one_off import run_one_off_fleet, run_retry_kill9


@pytest.mark.scenario
@pytest.mark.slow
def test_one_off_four_processes_postgres(pg_dsn: str, tmp_path: Path) -> None:
    run_one_off_fleet(f"{pg_dsn}?table_prefix=once{uuid.uuid4().hex[:6]}_", tmp_path)


@pytest.mark.slow
def test_one_off_four_processes_sqlite(tmp_path: Path) -> None:
    run_one_off_fleet(f"sqlite:///{tmp_path / 'once.db'}", tmp_path)


@pytest.mark.scenario
@pytest.mark.slow
def test_kill9_during_a_retry_postgres(pg_dsn: str, tmp_path: Path) -> None:
    run_retry_kill9(f"{pg_dsn}?table_prefix=retry{uuid.uuid4().hex[:6]}_", tmp_path)


@pytest.mark.slow
def test_kill9_during_a_retry_sqlite(tmp_path: Path) -> None:
    run_retry_kill9(f"sqlite:///{tmp_path / 'retry.db'}", tmp_path)
