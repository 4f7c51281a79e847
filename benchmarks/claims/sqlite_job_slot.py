"""What one lease job-slot costs SQLite's engine, beside smaller sets of statements.

    uv run --frozen --no-sync python benchmarks/claims/sqlite_job_slot.py [--jobs 10000] [--rounds 4]

SQLite's engine runs in the client process, so every statement is client
CPU. For each side a fresh database file gets ``--jobs`` jobs; each round
claims one new slot of every job (one won claim each), then finishes every
run and stores its result, in chunks of 500 items per ``BEGIN IMMEDIATE``
transaction. The first round, which creates the rows' pages, is not counted.
The sides:

- ``backend``: ``SqliteBackend``'s ``runs.claim_many`` and
  ``runs.finish_and_save_many``, what the scheduler sends (aiosqlite's
  thread included: CPU is the process's);
- ``raw: the backend's statements``: the statements the backend runs for a
  new won claim (clock, run row, live older run, insert run, insert claim) and
  a finish-and-save (finish, result upsert, save counter), through stdlib
  ``sqlite3``, no Python around them;
- ``raw: three writes``: the run inserted, finished, and its result upserted;
- ``raw: one row``: the run inserted, then finished with its outcome in the
  same row (no results table at all).

Printed per side: CPU µs per job-slot (median of the rounds) for the claim,
the finish with its result, and both; statements per job-slot; and the total
as a ratio of the backend's and of a 50 µs client-CPU target per job-slot
(which also has to pay for the scheduler itself).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import ok_ends
from anarchon.types import RunClaim
from anarchon_sql import SqliteBackend

BASE_SLOT = 1_700_000_000_000
LEASE_MS = 60_000
HISTORY_SIZE = 1000
CHUNK = 500
TARGET_US = 50.0

Round = tuple[float, float]  # CPU µs per job-slot: claim, finish + result

_statements = [0]  # statements run, BEGIN and COMMIT not counted (every connection is traced)


def _trace(statement: str) -> None:
    if statement.lstrip()[:6].upper() not in ("BEGIN ", "COMMIT"):
        _statements[0] += 1


def _traced_connect(
    connect: Callable[..., sqlite3.Connection],
) -> Callable[..., sqlite3.Connection]:
    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(_trace)
        return conn

    return traced


def _fresh_backend(jobs: int) -> tuple[SqliteBackend, list[str]]:
    path = os.path.join(tempfile.mkdtemp(prefix="anarchon-sqlite-bench-"), "anarchon.db")
    backend = SqliteBackend(path)
    names = [f"job-{j:06d}" for j in range(jobs)]

    async def prepare() -> None:
        await backend.init()
        for name in names:
            await backend.prepare_job(name, HISTORY_SIZE)

    asyncio.run(prepare())
    return backend, names


def backend_rounds(jobs: int, rounds: int) -> tuple[list[Round], float]:
    """The backend's batch members; returns per-round CPU and statements per job-slot."""
    backend, names = _fresh_backend(jobs)
    runs = backend.runs
    assert runs is not None
    out: list[Round] = []
    counted = [0]

    async def run() -> None:
        for r in range(rounds + 1):
            slot = BASE_SLOT + r * 10_000
            claims = [
                RunClaim(n, slot, uuid.uuid4().hex, "i-1", LEASE_MS, 3, False, None, True)
                for n in names
            ]
            before = _statements[0]
            t0 = time.process_time()
            won = await runs.claim_many(claims)
            t1 = time.process_time()
            done = await runs.finish_and_save_many(*ok_ends(claims, "i-1", HISTORY_SIZE))
            t2 = time.process_time()
            if any(o.kind != "won" for o in won) or done is None or not all(done):
                raise AssertionError("a claim was not won or a finish was refused")
            if r:
                out.append(((t1 - t0) * 1e6 / jobs, (t2 - t1) * 1e6 / jobs))
                counted[0] += _statements[0] - before
        await backend.close()

    asyncio.run(run())
    return out, counted[0] / (jobs * rounds)


def raw_rounds(jobs: int, rounds: int, side: str) -> tuple[list[Round], float]:
    """One raw statement set through stdlib sqlite3 on the backend's own tables."""
    backend, names = _fresh_backend(jobs)
    assert backend.path is not None
    s = backend._sql  # the backend's statement texts, so the raw side runs the same SQL
    asyncio.run(backend.close())
    conn = sqlite3.connect(backend.path, isolation_level=None)
    conn.execute(f"PRAGMA synchronous = {backend.synchronous.upper()}")
    counted = 0

    def claim(job: str, slot: int, token: str, now: int) -> None:
        if side == "statements":
            now = int(conn.execute(s.now).fetchone()[0])
            conn.execute(s.run_row, (job, slot)).fetchall()
            conn.execute(s.live_older, (job, slot, now)).fetchall()
        conn.execute(
            s.insert_run, (job, slot, 1, 3, token, "running", "i-1", now + LEASE_MS, now, None)
        )
        if side == "statements":
            conn.execute(s.insert_claim, (job, token, slot, 1, "i-1", now, 0))

    def finish(job: str, slot: int, token: str, now: int) -> None:
        if not conn.execute(s.finish, ("ok", None, job, slot, token)).fetchall():
            raise AssertionError("a finish was refused")
        if side != "one row":
            row = (job, token, slot, 1, "i-1", "ok", None, slot, slot + 1, None, 0)
            conn.execute(s.upsert_result, row)
        if side == "statements":
            conn.execute(s.count_save, (job,)).fetchall()

    def wave(step: Callable[[str, int, str, int], None], slot: int, tokens: list[str]) -> float:
        nonlocal counted
        before = _statements[0]
        t0 = time.process_time()
        for c in range(0, jobs, CHUNK):
            conn.execute("BEGIN IMMEDIATE")
            now = int(conn.execute(s.now).fetchone()[0])
            for i in range(c, min(c + CHUNK, jobs)):
                step(names[i], slot, tokens[i], now)
            conn.execute("COMMIT")
        cpu_us = (time.process_time() - t0) * 1e6 / jobs
        if slot != BASE_SLOT:
            counted += _statements[0] - before
        return cpu_us

    out: list[Round] = []
    for r in range(rounds + 1):
        slot = BASE_SLOT + r * 10_000
        tokens = [uuid.uuid4().hex for _ in names]
        claimed = wave(claim, slot, tokens)
        finished = wave(finish, slot, tokens)
        if r:
            out.append((claimed, finished))
    conn.close()
    return out, counted / (jobs * rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    sqlite3.connect = _traced_connect(sqlite3.connect)  # type: ignore[assignment]
    sides: dict[str, Callable[[], tuple[list[Round], float]]] = {
        "backend": lambda: backend_rounds(args.jobs, args.rounds),
        "raw: the backend's statements": lambda: raw_rounds(args.jobs, args.rounds, "statements"),
        "raw: three writes": lambda: raw_rounds(args.jobs, args.rounds, "three"),
        "raw: one row": lambda: raw_rounds(args.jobs, args.rounds, "one row"),
    }
    print(
        f"SQLite {sqlite3.sqlite_version} WAL: {args.jobs} jobs due together x {args.rounds}"
        f" rounds, {CHUNK} items per transaction; CPU µs per job-slot (median of the rounds)"
    )
    header = f"{'side':32s} {'claim':>7s} {'finish+result':>14s} {'total':>7s} {'stmts':>6s}"
    print(f"{header} {'/backend':>9s} {'/50 µs':>7s}")
    backend_total: float | None = None
    for name, run in sides.items():
        rounds, statements = run()
        claim = statistics.median(r[0] for r in rounds)
        finish = statistics.median(r[1] for r in rounds)
        total = statistics.median(r[0] + r[1] for r in rounds)
        backend_total = backend_total or total
        print(
            f"{name:32s} {claim:7.1f} {finish:14.1f} {total:7.1f} {statements:6.2f}"
            f" {total / backend_total:8.2f}x {total / TARGET_US:6.2f}x"
        )


if __name__ == "__main__":
    main()
