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

import pytest

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


# Every error is one coded line ----------------------------------------------


def run_in(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ANARCHON, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(cwd), **(env or {})},
    )


def assert_one_coded_line(
    result: subprocess.CompletedProcess[str], code: str, exit_code: int
) -> str:
    assert result.returncode == exit_code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith(f"anarchon: {code}: "), lines[0]
    return lines[0]


APPS = {
    "not_a_scheduler.py": "scheduler = 42\n",
    "imports_a_missing_dep.py": "import no_such_dependency_xyz\n",
    "opens_a_missing_file.py": "open('/nonexistent/anarchon/config.toml')\n",
    "raises_at_import.py": "raise RuntimeError('boom\\nsecond line')\n",
    "bad_job.py": (
        "from anarchon import Scheduler\n"
        "scheduler = Scheduler('memory://')\n"
        "@scheduler.cron('tick', '- * * * *')\n"
        "def tick(ctx):\n"
        "    pass\n"
    ),
}


@pytest.mark.parametrize(
    ("target", "code", "exit_code", "words"),
    [
        (
            "no_such_module:scheduler",
            "ANARCHON_INVALID_CONFIG",
            2,
            "no module named 'no_such_module'",
        ),
        (
            "no_such_pkg.sub:scheduler",
            "ANARCHON_INVALID_CONFIG",
            2,
            "no module named 'no_such_pkg'",
        ),
        ("not_a_scheduler:missing", "ANARCHON_INVALID_CONFIG", 2, "has no attribute 'missing'"),
        (
            "not_a_scheduler:scheduler",
            "ANARCHON_INVALID_CONFIG",
            2,
            "not an anarchon.Scheduler (got int)",
        ),
        ("imports_a_missing_dep:s", "ANARCHON_UNEXPECTED", 1, "ModuleNotFoundError"),
        ("opens_a_missing_file:s", "ANARCHON_OS_ERROR", 1, "FileNotFoundError"),
        ("raises_at_import:s", "ANARCHON_UNEXPECTED", 1, "RuntimeError: boom second line"),
        ("bad_job:scheduler", "ANARCHON_INVALID_JOB", 2, "a lone `-` in the minute field"),
        ("no_colon", "ANARCHON_USAGE", 2, "expected module:attribute"),
    ],
)
def test_run_errors_are_one_coded_line(
    tmp_path: Path, target: str, code: str, exit_code: int, words: str
) -> None:
    for name, text in APPS.items():
        (tmp_path / name).write_text(text)
    line = assert_one_coded_line(run_in(tmp_path, "run", target), code, exit_code)
    assert words in line


def test_debug_adds_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "raises_at_import.py").write_text(APPS["raises_at_import.py"])
    result = run_in(tmp_path, "run", "raises_at_import:s", env={"ANARCHON_DEBUG": "1"})
    assert result.returncode == 1
    first, *rest = result.stderr.splitlines()
    assert first.startswith("anarchon: ANARCHON_UNEXPECTED: ")
    assert "Traceback" in "\n".join(rest)


@pytest.mark.parametrize(
    "argv",
    [
        ["--no-such-flag"],
        ["next"],
        ["frobnicate"],
        ["next", "10s", "-n", "many"],
        ["history"],
    ],
)
def test_usage_errors_are_one_coded_line(argv: list[str]) -> None:
    assert_one_coded_line(run(*argv), "ANARCHON_USAGE", 2)


@pytest.mark.parametrize(
    "url",
    [
        "cron:hunter2@cache:6379/0",
        "redis:/u:hunter2@cache:6379/0",
        "redis://u:hun/ter2@cache:6379/0",
        "redis://u:hunter2",
        "host=db password=hunter2",
    ],
)
def test_backend_errors_never_show_the_password(url: str) -> None:
    result = run("history", "job", "--backend", url, timeout=60)
    assert result.returncode in (1, 2)
    assert "hunter2" not in result.stderr, result.stderr
    assert "ter2" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("anarchon: ANARCHON_")


def test_next_with_an_unknown_zone_and_far_slots() -> None:
    line = assert_one_coded_line(run("next", "10s", "--tz", "Mars/Base"), "ANARCHON_INVALID_JOB", 2)
    assert "Mars/Base" in line
    far = run("next", "1000000000d", "-n", "2")
    assert far.returncode == 0, far.stderr
    assert "outside years 1-9999" in far.stdout
