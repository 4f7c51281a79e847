"""A fault scenario of SQLite alone (anarchon.testing.scenarios.faults): real processes, honest counts.

The scenarios every lease store runs (``LeaseFaultScenarios``) are in test_sql_contracts.py.

Each scenario runs two scheduler processes on one database, injects a fault
into one of them and counts duplicates, zombies, overlaps, fenced commits by
stale attempts, lost results, missed and unfinished slots (``FaultReport``).
"""

from __future__ import annotations

from pathlib import Path

from anarchon.testing.scenarios import faults


def test_blocking_sync_handler_at_stop_sqlite(tmp_path: Path) -> None:
    """A sync handler blocking 8 s, ``stop()`` of its runner 2 s into it (docs/leases.md).

    No other instance starts the slot while the thread lives (no overlap), and
    the slot runs once: the thread's completed run is finished, not handed over.
    """
    url = f"sqlite:///{tmp_path / 'store.db'}"
    report = faults.blocking_handler_at_stop(url, tmp_path=tmp_path)
    print(report.summary())
    assert report.completed_slots >= 1, report.summary()
    assert report.overlaps == [], report.summary()
    assert report.duplicates == {}, report.summary()
    assert report.zombies == [], report.summary()
    assert report.lost == [], report.summary()
