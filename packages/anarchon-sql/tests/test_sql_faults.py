"""Fault scenarios (anarchon.testing.scenarios.faults) on PostgreSQL and SQLite: real processes, honest counts.

Each scenario runs two scheduler processes on one database, injects a fault
into one of them and counts duplicates, zombies, overlaps, fenced commits by
stale attempts, lost results, missed and unfinished slots (``FaultReport``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from anarchon.testing.scenarios import faults


def _taken_over_as_attempt_2(report: faults.FaultReport) -> None:
    print(report.summary())
    assert report.slots > 0
    # A kill -9 between a run's finish and its history write loses that record (an open
    # gap, docs/operations.md "What we test"): allowed, counted, nothing else is.
    assert report.clean_but_cut_results, report.summary()
    assert report.recovery_s is not None, report.summary()
    other = "w1" if report.victim == "w0" else "w0"
    assert report.fault_history == [
        (1, report.victim, "interrupted", "lease_lost"),
        (2, other, "ok", None),
    ], report.summary()


@pytest.mark.slow
def test_kill9_takeover_postgres(pg_dsn: str, tmp_path: Path) -> None:
    """PostgreSQL: the other instance takes over as attempt 2; nothing else goes wrong."""
    _taken_over_as_attempt_2(faults.kill9_takeover(pg_dsn, tmp_path=tmp_path))


@pytest.mark.slow
def test_kill9_takeover_sqlite(tmp_path: Path) -> None:
    """SQLite (two processes on one file): the same takeover."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _taken_over_as_attempt_2(faults.kill9_takeover(url, tmp_path=tmp_path, after_s=4.0))


@pytest.mark.scenario
def test_sigstop_zombie_guarded_commits_nothing_postgres(pg_dsn: str, tmp_path: Path) -> None:
    """The fenced example of docs/leases.md, paused past its lease: nothing committed after SIGCONT."""
    report = faults.sigstop_past_lease(pg_dsn, tmp_path=tmp_path, handler="guarded", after_s=3.0)
    print(report.summary())
    assert report.recovery_s is not None, report.summary()
    assert report.fenced_commits_by_stale == [], report.summary()
    assert report.zombies == [], report.summary()
    assert report.duplicates == {}, report.summary()
    assert report.lost == [], report.summary()
    assert report.missed == [], report.summary()
    assert report.unfinished == [], report.summary()


@pytest.mark.scenario
def test_sigstop_zombie_naive_write_is_refused_postgres(pg_dsn: str, tmp_path: Path) -> None:
    """A sync handler that never asks ``still_owner()``: its late write is refused by the fence."""
    report = faults.sigstop_past_lease(pg_dsn, tmp_path=tmp_path, handler="naive", after_s=3.0)
    print(report.summary())
    assert report.recovery_s is not None, report.summary()
    assert report.refused_writes >= 1, report.summary()
    assert report.fenced_commits_by_stale == [], report.summary()
    assert report.zombies == [], report.summary()
    assert report.duplicates == {}, report.summary()


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


def _handed_over(report: faults.FaultReport) -> None:
    print(report.summary())
    assert report.recovery_s is not None, report.summary()
    assert report.slots > 0, report.summary()
    assert report.clean, report.summary()


def test_handover_on_stop_sqlite(tmp_path: Path) -> None:
    """``stop()`` of the runner of 3 s handlers, ``stop_grace`` 0.5 s: handed over, run once each."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _handed_over(faults.handover_on_stop(url, tmp_path=tmp_path, after_s=6.0))


def test_handover_on_stop_postgres(pg_dsn: str, tmp_path: Path) -> None:
    """PostgreSQL: the same hand-over."""
    _handed_over(faults.handover_on_stop(pg_dsn, tmp_path=tmp_path, after_s=6.0))
