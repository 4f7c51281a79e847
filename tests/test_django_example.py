"""The Django example project, run for real: ``manage.py anarchon`` in two processes and ``runserver``.

A job runs in one process; SIGTERM hands its run over and the other process
takes it over as attempt 2; the project's view, and a sync program, read the
history through the sync facade.
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

from _processes import Process
from anarchon import SyncScheduler

PROJECT = Path(__file__).resolve().parent.parent / "examples" / "django_project"
STARTED = re.compile(r"report slot=(\d+) attempt=1 on (\S+)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _first_attempt(workers: dict[str, Process], after_ms: int, timeout: float) -> tuple[str, str]:
    """``(instance, slot)`` of the first attempt-1 start of a slot later than ``after_ms``.

    Only such a slot has a backup: an instance starts at the job's newest slot
    within ``max_late`` (docs/leases.md, "Who backs a run up"), so a slot that was
    no longer the newest when the other process started is never claimed, and
    never taken over, by it. Under load the two processes start seconds apart,
    and the first run printed can be such a slot, run late by the first one.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, worker in workers.items():
            for line in list(worker.lines):
                found = STARTED.search(line)
                if found and int(found.group(1)) > after_ms:
                    return name, found.group(1)
        time.sleep(0.05)
    raise AssertionError("no run started:\n" + "\n".join(w.output() for w in workers.values()))


def _runs(port: int, slot: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs/report?limit=50") as reply:
        body = json.loads(reply.read())
    assert body["job"] == "report"
    return [r for r in body["runs"] if str(r["slot"]) == slot]


def test_manage_py_anarchon_hands_over_on_sigterm_and_runserver_shows_history(
    tmp_path: Path,
) -> None:
    """In the gate although it takes 15-30 s: the one end-to-end run of the Django integration."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    env = {"ANARCHON_BACKEND_URL": url}
    workers = {
        name: Process(["manage.py", "anarchon"], PROJECT, {**env, "ANARCHON_INSTANCE_ID": name})
        for name in ("django-a", "django-b")
    }
    web: Process | None = None
    try:
        for worker in workers.values():
            worker.wait_for(lambda line: "running 1 job(s)" in line, 60, "manage.py anarchon")
        # Both timetables are seeded now; SQLite's clock is this machine's wall clock.
        both_started_ms = int(time.time() * 1000)
        runner, slot = _first_attempt(workers, both_started_ms, 60)
        other = "django-b" if runner == "django-a" else "django-a"
        time.sleep(0.5)  # mid-run: the handler works for 3 s
        assert workers[runner].stop() == 0, workers[runner].output()
        assert f"slot={slot} stopped: stop" in workers[runner].output()
        workers[other].wait_for(
            lambda line: f"report slot={slot} attempt=2 on {other}" in line,
            30,
            f"the take-over of slot {slot} by {other} (the runner printed:\n"
            f"{workers[runner].output()}\n)",
        )
        port = _free_port()
        web = Process(["manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"], PROJECT, env)
        web.wait_for(lambda line: "Quit the server" in line, 60, "runserver")
        deadline = time.monotonic() + 20
        runs = _runs(port, slot)
        while not any(r["attempt"] == 2 and r["status"] == "ok" for r in runs):
            assert time.monotonic() < deadline, f"attempt 2 never finished: {runs}"
            time.sleep(0.3)
            runs = _runs(port, slot)
        by_attempt = {r["attempt"]: r for r in runs}
        assert by_attempt[1]["instance"] == runner
        assert by_attempt[2]["instance"] == other
    finally:
        for process in [*workers.values(), *([web] if web else [])]:
            process.stop()
    reader = SyncScheduler(url)  # a sync program reading the same history
    try:
        records = [r for r in reader.history("report", 50) if str(r.slot) == slot]
    finally:
        reader.stop()
    assert {(r.attempt, r.instance_id) for r in records} >= {(1, runner), (2, other)}
