"""Separate OS processes on one store: exactly once per slot, and takeover after ``kill -9``.

The fleet tests run ``anarchon.testing.fleet``; the takeover tests run ``sql_worker.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from anarchon.backend import Backend
from anarchon.testing.fleet import read_history, run_fleet
from anarchon_sql import PostgresBackend, SqliteBackend

WORKER = str(Path(__file__).with_name("sql_worker.py"))


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, WORKER, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


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


# kill -9 → takeover as attempt 2 ------------------------------------------------

LEASE_MS = 2000
HEARTBEAT_MS = 500


def _wait_line(path: Path, prefix: str, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for fields in _lines(path):
            if fields[0] == prefix:
                return fields
        time.sleep(0.02)
    raise AssertionError(f"no {prefix!r} line in {path} after {timeout} s")


def _kill9(url: str, reader: Backend, tmp_path: Path) -> None:
    job = f"crash-{uuid.uuid4().hex[:8]}"
    out_a, out_b = tmp_path / "a.txt", tmp_path / "b.txt"
    lease, beat = f"{LEASE_MS}ms", f"{HEARTBEAT_MS}ms"
    a = _spawn("long", url, "runner-a", job, lease, beat, str(out_a))
    b: subprocess.Popen[bytes] | None = None
    try:
        started = _wait_line(out_a, "started", 30)
        assert started[2] == "1"
        slot = int(started[1])
        b = _spawn("long", url, "backup-b", job, lease, beat, str(out_b))
        _wait_line(out_b, "start", 30)
        time.sleep(1.5 * HEARTBEAT_MS / 1000)  # b has claimed: it is a backup now
        assert not [f for f in _lines(out_b) if f[0] == "started"], "b ran while a held the lease"
        os.kill(a.pid, signal.SIGKILL)
        killed = time.monotonic()
        a.wait(10)
        taken = _wait_line(out_b, "started", 30)
        elapsed = time.monotonic() - killed
        assert taken[1:] == [str(slot), "2", "backup-b"]
        assert elapsed <= (LEASE_MS + HEARTBEAT_MS) / 1000 + 1.0, f"takeover took {elapsed:.2f} s"
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    records = [r for r in read_history(reader, job, 10) if r.slot == slot]
    assert [(r.attempt, r.instance_id, r.status, r.reason) for r in records] == [
        (2, "backup-b", "running", None),
        (1, "runner-a", "interrupted", "lease_lost"),
    ]


@pytest.mark.slow
def test_kill9_takeover_postgres(pg_dsn: str, tmp_path: Path) -> None:
    url = f"{pg_dsn}?table_prefix=crash_"
    _kill9(url, PostgresBackend.from_url(url), tmp_path)


@pytest.mark.slow
def test_kill9_takeover_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    _kill9(f"sqlite:///{path}", SqliteBackend(str(path)), tmp_path)
