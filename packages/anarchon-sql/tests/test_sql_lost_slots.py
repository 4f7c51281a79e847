"""What a fleet on PostgreSQL loses to a crashed or paused process (docs/faults.md)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from anarchon.testing.scenarios.lost_slots import kill_and_pause_fleet

pytestmark = pytest.mark.scenario

FLEET_JOBS = int(os.environ.get("ANARCHON_CRASH_WAVE_JOBS", "2000"))
"""Jobs per process of the crash fleet (the issue's 2,000; lower it on a small machine)."""


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [FLEET_JOBS])
@pytest.mark.parametrize("candidates", [None, 2], ids=["every-instance", "candidates-2"])
def test_kill_and_pause_in_a_wave_lose_almost_nothing_postgres(
    pg_dsn: str, tmp_path: Path, jobs: int, candidates: int | None
) -> None:
    """4 processes x ``jobs`` jobs every 2 s; one ``kill -9``ed 150 ms into a wave, another
    SIGSTOPped 3.75 s later for 10 s: at most 0.5 % of the window's job-slots lost, none run
    twice, and every job runs again within 5 s of the kill."""
    url = f"{pg_dsn}?table_prefix=w{uuid.uuid4().hex[:8]}_"
    report = kill_and_pause_fleet(
        url, tmp_path=tmp_path, jobs=jobs, scheduler_options={"candidates": candidates}
    )
    print(report.summary())
    assert report.job_slots > 0
    assert report.twice == 0, report.summary()
    assert report.lost_share <= 0.005, report.summary()
    assert report.back_within_ms <= 5_000, report.summary()
