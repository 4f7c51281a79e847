"""Separate OS processes on one store: exactly once per slot, and takeover after ``kill -9``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from anarchon.backend import Backend
from anarchon.types import RunRecord
from anarchon_sql import PostgresBackend, SqliteBackend

WORKER = str(Path(__file__).with_name("sql_worker.py"))
PROCESSES = 8
WINDOW_S = 20.0
"""The common window in which all processes run (at least this long)."""
PERIOD_MS = 200


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


def _history(backend: Backend, job: str, limit: int) -> list[RunRecord]:
    async def read() -> list[RunRecord]:
        await backend.init()
        try:
            return await backend.history(job, limit)
        finally:
            await backend.close()

    return asyncio.run(read())


def _fleet(url: str, reader: Backend, tmp_path: Path) -> None:
    """8 processes, one 200 ms job, >= 20 s together: every slot ran exactly once."""
    job = f"fleet-{uuid.uuid4().hex[:8]}"
    startup_s = 8.0
    until_ms = int((time.time() + startup_s + WINDOW_S + 2.0) * 1000)
    outs = [tmp_path / f"worker-{i}.txt" for i in range(PROCESSES)]
    procs = [
        _spawn("interval", url, f"proc-{i}", job, str(until_ms), str(out))
        for i, out in enumerate(outs)
    ]
    try:
        for proc in procs:
            proc.wait(timeout=startup_s + WINDOW_S + 40)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    errors = [p.stderr.read().decode() if p.stderr else "" for p in procs]
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err[-3000:]

    starts, stops, runs = [], [], []
    for out in outs:
        for fields in _lines(out):
            if fields[0] == "start":
                starts.append(int(fields[1]))
            elif fields[0] == "stop":
                stops.append(int(fields[1]))
            elif fields[0] == "run":
                runs.append((int(fields[1]), int(fields[2]), fields[3]))
    assert len(starts) == PROCESSES
    assert len(stops) == PROCESSES
    # Slots well inside the time every process was running.
    first = (max(starts) // PERIOD_MS + 3) * PERIOD_MS
    last = (min(stops) // PERIOD_MS - 3) * PERIOD_MS
    assert last - first >= WINDOW_S * 1000 - 2000, (
        f"processes ran together for only {(last - first) / 1000:.1f} s"
    )
    window = list(range(first, last + 1, PERIOD_MS))

    ran = Counter(slot for slot, _attempt, _instance in runs if first <= slot <= last)
    duplicates = {slot: n for slot, n in ran.items() if n > 1}
    missed = [slot for slot in window if ran[slot] == 0]
    assert not duplicates, f"slots run more than once: {duplicates}"
    assert not missed, f"{len(missed)} slots never ran: {missed[:10]}"
    assert all(attempt == 1 for _slot, attempt, _i in runs)
    instances = {instance for slot, _a, instance in runs if first <= slot <= last}
    assert len(instances) >= 2, "one process won everything: the race was not exercised"

    records = _history(reader, job, 2000)
    in_window = [r for r in records if first <= r.slot <= last]
    per_slot = Counter(r.slot for r in in_window)
    assert sorted(per_slot) == window, "history does not have every slot of the window"
    assert set(per_slot.values()) == {1}, "history has a slot twice"
    assert {r.status for r in in_window} == {"ok"}
    by_slot = {slot: instance for slot, _a, instance in runs}
    assert all(r.instance_id == by_slot[r.slot] for r in in_window)


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
    records = [r for r in _history(reader, job, 10) if r.slot == slot]
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
