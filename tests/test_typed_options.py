"""Typed job options: a misspelt option of every()/cron()/add()/at() is a ``mypy --strict`` error.

The options are a ``TypedDict`` (``anarchon.JobOptions``) used with ``Unpack``; the runtime checks stay.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from anarchon import InvalidJobError, Scheduler

GOOD = """
    from datetime import datetime, timezone

    from anarchon import Every, Retry, RunContext, Scheduler, SyncScheduler
    from anarchon.contrib.flask import Anarchon

    scheduler = Scheduler("memory://")
    sync = SyncScheduler("memory://")
    flask_jobs = Anarchon()

    def handler(ctx: RunContext) -> None: ...

    scheduler.every("a", "10s", handler, jitter=0, max_late="1m", retry=Retry(attempts=3))
    scheduler.cron("b", "0 3 * * *", handler, tz="Europe/Paris", overlap=True, timeout=30)
    scheduler.add("c", Every("1m"), handler, history_size=10, enabled=False)
    scheduler.at("d", datetime(2030, 1, 1, tzinfo=timezone.utc), handler, catch_up="1h")
    sync.every("e", "10s", handler, max_attempts=2)
    sync.cron("f", "* * * * *", handler, tz="UTC", history_ttl="1d")
    sync.at("g", 1_900_000_000_000, handler)

    @flask_jobs.every("h", "5m", jitter="1s")
    def h(ctx: RunContext) -> None: ...

    @flask_jobs.cron("i", "0 * * * *", tz="UTC", retry=None)
    def i(ctx: RunContext) -> None: ...
"""

BAD = """
    from anarchon import Every, RunContext, Scheduler, SyncScheduler
    from anarchon.contrib.flask import Anarchon

    scheduler = Scheduler("memory://")
    sync = SyncScheduler("memory://")
    flask_jobs = Anarchon()

    def handler(ctx: RunContext) -> None: ...

    scheduler.every("a", "10s", handler, jiter=0)
    scheduler.cron("b", "0 3 * * *", handler, max_lat="1m")
    scheduler.add("c", Every("1m"), handler, overlapp=True)
    scheduler.at("d", 1_900_000_000_000, handler, retries=3)
    scheduler.every("e", "10s", handler, max_attempts="3")
    sync.every("f", "10s", handler, time_out=5)

    @flask_jobs.every("g", "5m", histroy_size=5)
    def g(ctx: RunContext) -> None: ...
"""


def _mypy(tmp_path: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_mypy_strict_accepts_the_options_and_refuses_typos(tmp_path: Path) -> None:
    good = _mypy(tmp_path, "good", GOOD)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = _mypy(tmp_path, "bad", BAD)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    out = bad.stdout
    for typo in ("jiter", "max_lat", "overlapp", "retries", "time_out", "histroy_size"):
        assert f'Unexpected keyword argument "{typo}"' in out, out
    # every bad call is an error (max_attempts="3": no overload matches a str), nothing else
    lines = {int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line}
    assert lines == {11, 12, 13, 14, 15, 16, 18}, out


def test_the_runtime_checks_stay() -> None:
    scheduler = Scheduler("memory://")
    options: dict[str, object] = {"jiter": 0}
    with pytest.raises(InvalidJobError, match="unknown option"):
        scheduler.every("a", "10s", lambda ctx: None, **options)  # type: ignore[arg-type]
