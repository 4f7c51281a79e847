"""A lease lives as long as its handler (docs/leases.md): a blocking sync handler at ``stop()``.

Two OS processes share a store. The runner's sync handler blocks 8 s in
``time.sleep`` and ignores cancellation; ``stop()`` is called 2 s after it
started (``stop_grace`` 3 s). The other instance is a backup of the slot. From
the wall-clock intervals the handlers write: no other instance starts the slot
while the runner's thread lives; the backup takes the slot over (attempt 2)
only after that thread has returned.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from anarchon_sql import PostgresBackend, SqliteBackend

WORKER = str(Path(__file__).with_name("lease_worker.py"))


def _spawn(
    url: str,
    instance: str,
    job: str,
    out: Path,
    run_s: float,
    stop_after: float,
    mode: str = "sync",
) -> subprocess.Popen[bytes]:
    args = [url, instance, job, str(out), str(run_s), str(stop_after), mode]
    return subprocess.Popen(
        [sys.executable, WORKER, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def _wait_for(path: Path, word: str, timeout: float) -> list[str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for line in _lines(path):
            if line[0] == word:
                return line
        time.sleep(0.05)
    raise AssertionError(f"no {word!r} line in {path} within {timeout} s: {_lines(path)}")


def _blocking_sync_handler_at_stop(url: str, tmp_path: Path) -> None:
    job = f"hold-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "runs.txt"
    runner = _spawn(url, "runner", job, out, 30, 2)
    try:
        first = _wait_for(out, "live", 30)
        assert first[3] == "runner"
        backup = _spawn(url, "backup", job, out, 24, 0)
        try:
            runner_err = runner.communicate(timeout=40)[1].decode()
            runner_exit_ms = int(time.time() * 1000)
            backup_err = backup.communicate(timeout=40)[1].decode()
        finally:
            backup.kill()
    finally:
        runner.kill()
    assert runner.returncode == 0, runner_err
    assert backup.returncode == 0, backup_err
    records = _lines(out)
    print("\n".join(" ".join(r) for r in records))
    starts = {(r[1], r[2], r[3]): int(r[4]) for r in records if r[0] == "live"}
    ends = {(r[1], r[2], r[3]): int(r[4]) for r in records if r[0] == "end"}
    assert set(starts) == set(ends), "a handler never returned"
    intervals = sorted((starts[k], ends[k], k) for k in starts)
    for (s1, e1, k1), (s2, e2, k2) in itertools.pairwise(intervals):
        assert s2 >= e1, f"two live handlers of one slot: {k1} {s1}-{e1} and {k2} {s2}-{e2}"
    runner_runs = [k for k in starts if k[2] == "runner"]
    assert runner_runs == [(first[1], "1", "runner")]
    runner_end = ends[runner_runs[0]]
    assert runner_end - starts[runner_runs[0]] >= 7_900, "the handler did not block 8 s"
    taken = [k for k in starts if k[2] == "backup"]
    # The runner's thread returned while stop() waited; the slot was then handed over.
    assert taken == [(first[1], "2", "backup")], records
    assert starts[taken[0]] >= runner_end
    assert starts[taken[0]] <= runner_exit_ms + 5_000
    assert "still runs after stop() cancelled it" in runner_err, runner_err
    stopped = [int(r[2]) for r in records if r[0] == "stopped"]
    assert stopped
    assert stopped[0] >= runner_end


def test_blocking_sync_handler_at_stop_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    SqliteBackend.from_url(url)  # the URL parses
    _blocking_sync_handler_at_stop(url, tmp_path)


@pytest.mark.slow
def test_blocking_sync_handler_at_stop_postgres(pg_dsn: str, tmp_path: Path) -> None:
    url = f"{pg_dsn}?table_prefix=hold_"
    PostgresBackend.from_url(url)
    _blocking_sync_handler_at_stop(url, tmp_path)


def _blocking_async_handler(url: str, tmp_path: Path) -> None:
    """An async handler blocks its loop 8 s, lease 3 s, 3 processes: one live run, a stall warning."""
    job = f"block-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "runs.txt"
    workers = [_spawn(url, f"i{n}", job, out, 16, 0, "async-block") for n in range(3)]
    errors: list[str] = []
    try:
        for worker in workers:
            errors.append(worker.communicate(timeout=60)[1].decode())
    finally:
        for worker in workers:
            worker.kill()
    for worker, err in zip(workers, errors, strict=True):
        assert worker.returncode == 0, err
    records = _lines(out)
    print("\n".join(" ".join(r) for r in records))
    live = [r for r in records if r[0] == "live"]
    assert len(live) == 1, records  # attempt 1 only: no backup started beside the blocked loop
    assert live[0][2] == "1"
    runner = int(live[0][3][1:])
    assert "loop stall" in errors[runner], errors[runner]
    assert f"while running {job}" in errors[runner], errors[runner]
    assert "lost its lease" not in errors[runner], errors[runner]


def test_blocking_async_handler_keeps_its_lease_sqlite(tmp_path: Path) -> None:
    _blocking_async_handler(f"sqlite:///{tmp_path / 'store.db'}", tmp_path)


@pytest.mark.slow
def test_blocking_async_handler_keeps_its_lease_postgres(pg_dsn: str, tmp_path: Path) -> None:
    _blocking_async_handler(f"{pg_dsn}?table_prefix=block_", tmp_path)
