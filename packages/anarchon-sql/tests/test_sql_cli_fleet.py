"""The fleet commands of the CLI against a real SQLite file: status, unknown jobs, env URL, --watch."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from anarchon.fleet.types import Declaration
from anarchon.types import ClaimInput, StoredResult
from anarchon_sql import SqliteBackend

CLI = [sys.executable, "-m", "anarchon.cli"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def store(sqlite_path: str) -> str:
    """A SQLite store where two instances declare ``alpha`` and one ``beta``; alpha ran once."""

    async def fill() -> None:
        backend = SqliteBackend(sqlite_path)
        await backend.init()
        try:
            await backend.declare(
                [
                    Declaration("alpha", "i-1", "a" * 16, "every 60000ms", 0, 0),
                    Declaration("beta", "i-1", "b" * 16, "cron 0 3 * * * Europe/Athens", 0, 0),
                ],
                600_000,
            )
            await backend.declare(
                [Declaration("alpha", "i-2", "c" * 16, "every 1000ms", 0, 0)], 600_000
            )
            await backend.prepare_job("alpha", 100)
            slot = 1_700_000_040_000
            await backend.claim(ClaimInput("alpha", slot, "t1", "i-2", 100))
            await backend.save_result(
                "alpha", StoredResult(slot, "t1", "i-2", "ok", slot, slot + 5), 100
            )
        finally:
            await backend.close()

    asyncio.run(fill())
    return f"sqlite:///{sqlite_path}"


def test_status_json_lists_declared_jobs(store: str) -> None:
    done = _cli("status", "--backend", store, "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["job"]: row for row in json.loads(done.stdout)}
    assert sorted(rows) == ["alpha", "beta"]
    alpha, beta = rows["alpha"], rows["beta"]
    assert [i["instance_id"] for i in alpha["instances"]] == ["i-1", "i-2"]
    assert alpha["drift"] == {"a" * 16: 1, "c" * 16: 1}
    assert alpha["last_run"]["status"] == "ok"
    assert alpha["last_run"]["instance_id"] == "i-2"
    assert alpha["last_run"]["slot"] == 1_700_000_040_000
    assert beta["zone"] == "Europe/Athens"
    assert beta["next_slot"] > time.time() * 1000
    assert beta["last_run"] is None
    assert beta["drift"] == {}


def test_status_table_and_env_url(store: str) -> None:
    done = _cli("status", env={"ANARCHON_BACKEND_URL": store})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["job", "schedule", "next"]
    assert any(line.startswith("alpha") and "i-1,i-2" in line for line in lines)
    assert any(line.startswith("beta") and ("+02:00" in line or "+03:00" in line) for line in lines)


def test_unknown_job_is_one_coded_line_listing_the_known(store: str) -> None:
    for argv in (
        ["history", "alpah"],
        ["active", "alpha", "nope"],
        ["pause", "nope"],
        ["status", "x"],
    ):
        done = _cli(*argv, "--backend", store)
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("anarchon: ANARCHON_UNKNOWN_JOB: ")
        assert "alpha, beta" in done.stderr


def test_history_of_several_jobs_or_all(store: str) -> None:
    every = json.loads(_cli("history", "--backend", store, "--json").stdout)
    assert [(r["job"], r["status"]) for r in every] == [("alpha", "ok")]
    named = json.loads(_cli("history", "alpha", "beta", "--backend", store, "--json").stdout)
    assert named == every


def test_pause_resume_and_skip_write_the_control(store: str) -> None:
    paused = json.loads(_cli("pause", "beta", "--backend", store, "--json").stdout)
    assert paused["paused"] is True
    assert paused["updated_by"] == "cli"
    status = {r["job"]: r for r in json.loads(_cli("status", "--backend", store, "--json").stdout)}
    assert status["beta"]["paused"] is True
    assert status["alpha"]["paused"] is False
    resumed = json.loads(_cli("resume", "beta", "--backend", store, "--json").stdout)
    assert resumed["paused"] is False
    skipped = json.loads(_cli("skip", "beta", "--count", "2", "--backend", store, "--json").stdout)
    nxt = status["beta"]["next_slot"]
    # two slots of a daily cron: the one after the next (23-25 h later across a DST change)
    assert abs(skipped["skip_until"] - nxt - 86_400_000) <= 3_600_000
    assert skipped["first_skipped"] == nxt  # a daily slot hours away is claimed by nobody yet
    text = _cli("skip", "beta", "--backend", store)
    assert text.returncode == 0, text.stderr
    assert "skips the slot " in text.stdout  # the third one, after the two skipped above
    drifted = _cli("skip", "alpha", "--backend", store)
    assert drifted.returncode == 2
    assert "ANARCHON_INVALID_CONFIG" in drifted.stderr
    assert "drift" in drifted.stderr


def _sigint_as_in_a_terminal() -> None:
    """Ctrl-C's default action, in the child: a shell's background job (a CI runner
    started with ``&``) hands SIGINT down ignored, and Python keeps it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_watch_refreshes_until_interrupted(store: str) -> None:
    proc = subprocess.Popen(
        [*CLI, "status", "--backend", store, "--watch", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        preexec_fn=_sigint_as_in_a_terminal,
    )
    assert proc.stdout is not None
    headers = 0
    deadline = time.monotonic() + 60
    while headers < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("job "):
            headers += 1
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        _, stacks = proc.communicate(timeout=30)
        pytest.fail(f"status --watch did not end within 60 s of SIGINT:\n{stacks}")
    assert headers == 2
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""  # Ctrl-C ends --watch


def test_no_backend_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANARCHON_BACKEND_URL"}
    done = subprocess.run(
        [*CLI, "status"], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 2
    assert done.stderr.startswith("anarchon: ANARCHON_USAGE: no backend")


def test_version() -> None:
    done = _cli("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("anarchon ")


def test_a_garbage_control_row_hides_no_pause(sqlite_path: str) -> None:
    """A row of garbage in the controls table: a restarted instance keeps the pause, the CLI works."""
    import sqlite3

    from anarchon import RunContext, Scheduler

    url = f"sqlite:///{sqlite_path}"
    ran: list[str] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.job)

    def make() -> Scheduler:
        scheduler = Scheduler(SqliteBackend(sqlite_path), instance_id="r")
        scheduler.every("paused", "200ms", tick, jitter=0)
        scheduler.every("free", "200ms", tick, jitter=0)
        return scheduler

    async def first_life() -> None:
        scheduler = make()
        await scheduler.start()
        await scheduler.pause("paused")
        await scheduler.stop()

    asyncio.run(first_life())
    with sqlite3.connect(sqlite_path) as db:
        db.execute(
            "INSERT INTO anarchon_controls (job, paused, skip_until) VALUES ('zzz', 'x', '1e400')"
        )
    ran.clear()

    async def restarted() -> None:
        scheduler = make()
        await scheduler.start()
        await asyncio.sleep(1.5)
        await scheduler.stop()

    asyncio.run(restarted())
    assert "paused" not in ran
    assert ran.count("free") >= 2  # the other jobs run
    status = _cli("status", "--backend", url, "--json")
    assert status.returncode == 0, status.stderr
    assert "anarchon_controls[job='zzz']" in status.stderr
    rows = {row["job"]: row for row in json.loads(status.stdout)}
    assert rows["paused"]["paused"] is True
    for command in ("pause", "resume"):
        done = _cli(command, "free", "--backend", url)
        assert done.returncode == 0, done.stderr
