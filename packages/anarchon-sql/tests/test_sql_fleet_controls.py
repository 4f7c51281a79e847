"""Two OS processes on PostgreSQL and on SQLite, steered by the CLI (anarchon.testing.scenarios.control)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.scenarios.control import run_control_scenario


@pytest.mark.slow
def test_sqlite_two_processes_status_pause_resume_skip_drift(
    sqlite_path: str, tmp_path: Path
) -> None:
    run_control_scenario(f"sqlite:///{sqlite_path}", tmp_path)


@pytest.mark.scenario
@pytest.mark.slow
def test_postgres_two_processes_status_pause_resume_skip_drift(pg_dsn: str, tmp_path: Path) -> None:
    sep = "&" if "?" in pg_dsn else "?"
    run_control_scenario(f"{pg_dsn}{sep}table_prefix=ctl{uuid.uuid4().hex[:6]}_", tmp_path)
