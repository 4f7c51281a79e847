"""4 OS processes x 2,000 jobs due every second, >= 10 s together, on PostgreSQL and SQLite.

Every slot of every job in the common window runs exactly once (from the
processes' records and from the store's history), none is missed, every run is
a first attempt, and no process logs an outage or an error. The checks per job
are those of ``anarchon.testing.fleet`` (:class:`~anarchon.testing.fleet.FleetResult`).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from anarchon.backend import Backend
from anarchon.testing.fleet import EDGE_SLOTS, FleetResult, FleetRun
from anarchon.types import RunRecord
from anarchon_sql import PostgresBackend, SqliteBackend

WORKER = str(Path(__file__).with_name("sql_many_jobs_worker.py"))
PROCESSES = 4
JOBS = 2000
EVERY_MS = 1000
WINDOW_S = 10.0
STARTUP_S = 25.0
OUTAGE_WORDS = ("unreachable", "outage", "Traceback", " ERROR ", "CRITICAL")


def _parse(outs: list[Path], result_of: dict[str, FleetResult]) -> tuple[list[int], list[int]]:
    starts: list[int] = []
    stops: list[int] = []
    for out in outs:
        if not out.exists():
            continue
        for line in out.read_text().splitlines():
            fields = line.split()
            if fields[0] == "start":
                starts.append(int(fields[1]))
            elif fields[0] == "stop":
                stops.append(int(fields[1]))
            elif fields[0] == "run":
                job, slot, attempt, instance = fields[1:5]
                result_of[job].runs.append(FleetRun(int(slot), int(attempt), instance))
            else:
                raise AssertionError(f"{out}: not a record: {line!r}")
    return starts, stops


def _end_once_started(outs: list[Path], until_file: Path, began: float) -> None:
    """Once every worker wrote its ``start`` (within ``STARTUP_S``), end them ``WINDOW_S`` (and
    the edge slots' margin) later instead of at the fixed end given at launch."""
    while time.monotonic() - began < STARTUP_S:
        started = sum(1 for out in outs if out.exists() and out.read_text().startswith("start "))
        if started == len(outs):
            partial = until_file.with_suffix(".tmp")
            margin_s = 2 + 2 * EDGE_SLOTS * EVERY_MS / 1000  # the edge slots are not checked
            partial.write_text(str(int((time.time() + WINDOW_S + margin_s) * 1000)))
            partial.replace(until_file)  # atomic: a worker never reads half a number
            return
        time.sleep(0.2)


async def _histories(reader: Backend, jobs: list[str], limit: int) -> dict[str, list[RunRecord]]:
    await reader.init()
    try:
        return {job: await reader.history(job, limit) for job in jobs}
    finally:
        await reader.close()


def _many_jobs(url: str, reader: Backend, tmp_path: Path) -> None:
    until_ms = int((time.time() + STARTUP_S + WINDOW_S + 8) * 1000)
    outs = [tmp_path / f"many-{i}.txt" for i in range(PROCESSES)]
    errs = [tmp_path / f"many-{i}.err" for i in range(PROCESSES)]
    until_file = tmp_path / "until.txt"
    procs = []
    began = time.monotonic()
    try:
        for i in range(PROCESSES):
            with open(errs[i], "wb") as err:
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            WORKER,
                            url,
                            f"proc-{i}",
                            str(JOBS),
                            "1s",
                            str(until_ms),
                            str(outs[i]),
                            str(until_file),
                        ],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        start_new_session=True,
                    )
                )
        _end_once_started(outs, until_file, began)
        deadline = time.monotonic() + STARTUP_S + WINDOW_S + 60
        for proc in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break  # killed below; its records so far are checked (and it fails the check)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    elapsed = time.monotonic() - began
    jobs = [f"m{k}" for k in range(JOBS)]
    results = {
        job: FleetResult(job=job, processes=PROCESSES, every_ms=EVERY_MS, window_s=WINDOW_S)
        for job in jobs
    }
    starts, stops = _parse(outs, results)
    stderr = [e.read_text(errors="replace") for e in errs]
    codes = [p.returncode for p in procs]
    histories = asyncio.run(_histories(reader, jobs, 200))
    problems: list[str] = []
    for job, result in results.items():
        result.starts, result.stops = list(starts), list(stops)
        result.returncodes, result.stderr = codes, stderr
        result.history = histories[job]
        for problem in result.problems(min_instances=1):
            problems.append(f"{job}: {problem}")
    winners = {r.instance for result in results.values() for r in result.runs}
    logged = [
        line
        for text in stderr
        for line in text.splitlines()
        if any(word in line for word in OUTAGE_WORDS)
    ]
    sample = results[jobs[0]]
    twice = sum(len(r.duplicates()) for r in results.values())
    missed = sum(len(r.missed()) for r in results.values())
    per_slot: dict[int, int] = defaultdict(int)
    for result in results.values():
        for slot in result.missed():
            per_slot[slot] += 1
    first = sample.window[0] if sample.window else 0
    print(
        f"return codes {codes}; job-slots in the window: {len(sample.window) * JOBS},"
        f" ran twice {twice}, never ran {missed}; jobs missing each slot of the window:"
        f" {[(round((slot - first) / 1000), n) for slot, n in sorted(per_slot.items())]}"
    )
    print(
        f"{PROCESSES} processes x {JOBS} jobs every {EVERY_MS} ms: {len(sample.window)} slots"
        f" per job in {sample.common_s:.1f} s, {sum(len(r.runs) for r in results.values())} runs,"
        f" winners {sorted(winners)}, {len(problems)} problems, {len(logged)} outage/error"
        f" lines, {elapsed:.1f} s in all"
    )
    by_kind: dict[str, int] = defaultdict(int)
    for problem in problems:
        by_kind[problem.split(": ", 1)[1].splitlines()[0][:80]] += 1
    tails = [text[-600:] for text in stderr]
    assert not problems, f"{len(problems)} problems by kind {dict(by_kind)}; stderr tails {tails}"
    assert len(winners) >= 2, f"only {winners} won: the race was not exercised"
    assert not logged, f"{len(logged)} outage or error lines logged, e.g. {logged[:5]}"


@pytest.mark.scenario
@pytest.mark.slow
def test_four_processes_two_thousand_jobs_postgres(pg_dsn: str, tmp_path: Path) -> None:
    url = f"{pg_dsn}?table_prefix=many_&pool_size=8"
    _many_jobs(url, PostgresBackend.from_url(url), tmp_path)


@pytest.mark.scenario
@pytest.mark.slow
def test_four_processes_two_thousand_jobs_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "many.db"
    _many_jobs(f"sqlite:///{path}", SqliteBackend(str(path)), tmp_path)
