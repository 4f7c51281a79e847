"""The ``anarchon`` command, driven as a real subprocess."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ANARCHON = [sys.executable, "-m", "anarchon.cli"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ANARCHON, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_next_prints_a_table_and_json() -> None:
    table = run("next", "0 3 * * *", "--tz", "Europe/Athens", "-n", "3")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.strip().splitlines()
    assert len(lines) == 2 + 3
    assert "03:00:00.000+02:00" in lines[2] or "03:00:00.000+03:00" in lines[2]
    as_json = json.loads(run("next", "10s", "-n", "4", "--json").stdout)
    slots = [row["slot"] for row in as_json]
    assert [b - a for a, b in itertools.pairwise(slots)] == [10_000] * 3


def test_bad_expression_is_one_line_with_code_and_exit_2() -> None:
    result = run("next", "61 * * * *")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "ANARCHON_INVALID_JOB" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_backend_is_one_line_with_code() -> None:
    result = run("history", "job", "--backend", "foo://user:secret@host/x")
    assert result.returncode == 2
    assert "ANARCHON_UNKNOWN_BACKEND" in result.stderr
    assert "secret" not in result.stderr
    assert "Traceback" not in result.stderr


def test_usage_error_exits_2() -> None:
    result = run("next")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_backends_lists_memory() -> None:
    rows = json.loads(run("backends", "--json").stdout)
    memory = next(row for row in rows if row["scheme"] == "memory")
    assert memory["distribution"] == "anarchon"


def test_demo_processes_share_sqlite_and_each_slot_runs_once() -> None:
    result = run("demo", "--instances", "3", "--seconds", "3.5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 processes share sqlite:///" in result.stdout
    pids = {line.split("(pid ")[1] for line in result.stdout.splitlines() if "(pid " in line}
    assert len(pids) >= 1
    assert "duplicates=0, missing=0" in result.stdout
    assert "OK: every slot ran exactly once" in result.stdout


def test_demo_on_memory_runs_in_one_process() -> None:
    result = run("demo", "--instances", "2", "--seconds", "2.5", "--backend", "memory://")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "in one process share memory://" in result.stdout
    assert "OK: every slot ran exactly once" in result.stdout


def test_run_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            """
            from anarchon import Scheduler

            scheduler = Scheduler("memory://", instance_id="app-1")

            @scheduler.every("beat", "200ms", jitter=0)
            def beat(ctx):
                print("ran", ctx.slot, flush=True)
            """
        )
    )
    process = subprocess.Popen(
        [*ANARCHON, "run", "app:scheduler"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    time.sleep(1.5)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "running 1 job(s) as app-1" in out
    assert out.count("ran ") >= 3
    assert "stopping with hand-over" in out
