"""Lease claims per second through the SQL backends vs the same claim SQL run raw.

    uv run python benchmarks/claims/claims_sql.py [--seconds 2] [--rounds 5]
                                           [--store postgres|sqlite|both]
                                           [--synchronous full|normal] [--variants]
                                           [--install-inline]
                                           [--mode single|batch|both] [--batch 500]

``--mode batch`` (or ``both``, the default) adds the batched claims: chunks of
``--batch`` claims, one new slot of each of ``--batch`` jobs per chunk (the
jobs of one wake-up), through ``backend.runs.claim_many()`` vs

- **raw, PostgreSQL**: the backend's one statement per chunk,
  ``SELECT ... FROM <prefix>claim_many_v1(%s::text[], ...)`` with the same
  nine arrays, on a psycopg ``AsyncConnection`` (autocommit);
- **raw, SQLite**: the backend's own statements for every claim of the chunk
  in one ``BEGIN IMMEDIATE`` transaction, run on aiosqlite's thread in one
  hop with the stdlib ``sqlite3`` connection underneath (the physical floor
  of the same driver);
- **fallback**: ``RunStore.claim_many`` of the base class (what a backend
  without native batch members gets: single claims, 16 in flight) — the
  "before".

It prints claims/s, the p50/p99 latency of one chunk, client CPU per claim
(``time.process_time()`` of this process; for SQLite that includes SQLite's
own work, which runs in-process) and, for one cycle of ``--batch`` job-slots
(claim, finish, save the result), the store round trips per job-slot, single
calls vs batch members (PostgreSQL: statements + BEGIN/COMMIT of explicit
transactions; SQLite: calls into aiosqlite's thread).

Starts its own throw-away PostgreSQL (Debian's binaries, through
``anarchon_testservers.postgres``; fsync and
synchronous_commit ON, like the anchors in ``shared/notes/stores.md``) and uses
a temp SQLite file (WAL, ``synchronous=full`` unless ``--synchronous``). Each
claim is one sequential call on a new slot of one job (``overlap=True``,
``create=True``: the winning path), on one connection:

- **backend**: ``backend.runs.claim(RunClaim(...))`` — the whole path a
  scheduler takes (parameter packing, the client adapter, psycopg's pool or
  aiosqlite's lock, reply to ``ClaimOutcome``);
- **raw, PostgreSQL**: the backend's one statement,
  ``SELECT ... FROM <prefix>claim_v1(%s, ...)`` (same SQL text, same nine
  parameters), executed with a psycopg ``AsyncConnection`` in autocommit mode;
- **raw, SQLite**: SQLite has no stored functions, so the backend's claim is a
  transaction of several statements; the raw side runs exactly those
  statements (the backend's own SQL text) through aiosqlite in one
  transaction: ``BEGIN IMMEDIATE``; ``SELECT`` the clock; ``SELECT`` the run
  row; ``INSERT`` the run; ``INSERT`` the claim record; ``COMMIT``.

The tables (and ``claim_v1()``) are created beforehand by a separate backend
that is then closed, as in a fleet where one instance installed them long ago:
a PostgreSQL session that ran ``CREATE FUNCTION`` ran that function up to
20 % slower afterwards in our runs, which would otherwise burden the
backend's pooled connection and not the raw one (``--install-inline`` shows it).

Rounds alternate which side goes first; the table shows the median over the
rounds of claims/s, and of each round's p50 and p99 latency. The target is a
backend/raw ratio of at least 70 % (PASS/MISS is informative).

``--variants`` adds a backend-only table (same rounds): PostgreSQL with 8
concurrent tasks on a pool of 8, PostgreSQL's generic claim transaction
(BEGIN, advisory lock, clock, row read ``FOR UPDATE``, inserts, COMMIT: 6
round trips) instead of ``claim_v1()``, and SQLite with the other
``synchronous`` setting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiosqlite
import psycopg
from anarchon.backend import RunStore
from anarchon.types import ResultWrite, RunClaim, RunFinish, StoredResult
from anarchon_sql import PostgresBackend, SqlBackend, SqliteBackend
from anarchon_testservers.postgres import start_postgres

LEASE_MS = 60_000
MAX_ATTEMPTS = 3
SLOT_BASE = 1_700_000_000_000
TARGET = 0.70

Stats = tuple[float, float, float]
"""(claims/s, p50 ms, p99 ms)."""

BatchStats = tuple[float, float, float, float]
"""(claims/s, p50 ms per chunk, p99 ms per chunk, client CPU µs per claim)."""

RunBatch = Callable[[int], Awaitable[None]]
"""One chunk: a new slot of each job, in round ``i``; raises unless every claim won."""

Claim = Callable[[int], Awaitable[None]]
"""One claim of the ``i``-th new slot; raises unless it won."""


async def timed(claim: Claim, seconds: float, tasks: int = 1, warmup: int = 200) -> Stats:
    """Run ``claim(i)`` for ``seconds`` from ``tasks`` tasks (after ``warmup`` calls)."""
    for i in range(warmup):  # connection, prepared statements, caches
        await claim(-1 - i)
    latencies: list[float] = []
    counter = iter(range(10**12))
    perf = time.perf_counter
    stop = perf() + seconds

    async def worker() -> None:
        while True:
            i = next(counter)
            t0 = perf()
            await claim(i)
            t1 = perf()
            latencies.append(t1 - t0)
            if t1 >= stop:
                return

    start = perf()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    elapsed = perf() - start
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return len(latencies) / elapsed, p50, p99


def _slot(i: int) -> int:
    return SLOT_BASE + (i + 1000) * 1000  # warm-up calls use i = -1 ... -200


def backend_claim(backend: SqlBackend, side: str = "backend") -> Claim:
    """``backend.runs.claim(RunClaim(...))`` on a new slot of a new job."""
    job = f"bench-{uuid.uuid4().hex[:8]}"
    runs = backend.runs

    async def claim(i: int) -> None:
        outcome = await runs.claim(
            RunClaim(job, _slot(i), f"t{i}", side, LEASE_MS, MAX_ATTEMPTS, overlap=True)
        )
        if not outcome.won:
            raise AssertionError(outcome)

    return claim


def claim_function_sql(backend: PostgresBackend) -> str:
    """The exact statement the backend sends per claim (placeholders converted)."""
    sql = backend.dialect.claim_statement(backend.tables)
    assert sql is not None
    return backend.dialect.placeholders(sql)


def raw_postgres_claim(conn: psycopg.AsyncConnection[Any], sql: str) -> Claim:
    """The backend's claim statement with the same parameters, on a psycopg connection."""
    job = f"bench-{uuid.uuid4().hex[:8]}"

    async def claim(i: int) -> None:
        params = (
            job,
            _slot(i),
            f"t{i}",
            "raw",
            LEASE_MS,
            MAX_ATTEMPTS,
            True,
            None,
            True,
            None,
            False,
        )
        cur = await conn.execute(sql, params)
        row = await cur.fetchone()
        if row is None or row[0] != "won":
            raise AssertionError(row)

    return claim


def raw_sqlite_claim(conn: aiosqlite.Connection, backend: SqliteBackend) -> Claim:
    """The statements of the backend's claim transaction (its SQL text), in one transaction.

    The path of a new slot with ``overlap=True`` in ``SqlBackend._claim_tx``;
    SQLite's ``serialize`` is a no-op (``BEGIN IMMEDIATE`` takes the lock).
    """
    s = backend._sql
    job = f"bench-{uuid.uuid4().hex[:8]}"
    fetch = conn.execute_fetchall

    async def claim(i: int) -> None:
        slot, token = _slot(i), f"t{i}"
        await conn.execute("BEGIN IMMEDIATE")
        try:
            now = int(next(iter(await fetch(s.now, ())))[0])
            if list(await fetch(s.run_row, (job, slot))):
                raise AssertionError(f"slot {slot} already claimed")
            run = (job, slot, 1, MAX_ATTEMPTS, token, "running", "raw", now + LEASE_MS, now, None)
            await fetch(s.insert_run, run)
            await fetch(s.insert_claim, (job, token, slot, 1, "raw", now, 0))
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()

    return claim


async def interleave(
    sides: dict[str, Callable[[], Claim]], seconds: float, rounds: int, tasks: int = 1
) -> dict[str, list[Stats]]:
    """``rounds`` rounds of every side (a new job each), the order rotating per round."""
    names = list(sides)
    results: dict[str, list[Stats]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(await timed(sides[name](), seconds, tasks))
    return results


def medians(rows: list[Stats]) -> Stats:
    """The median of each column over the rounds."""
    rate, p50, p99 = (statistics.median(col) for col in zip(*rows, strict=True))
    return rate, p50, p99


def print_comparison(store: str, results: dict[str, list[Stats]], raw_is: str) -> bool:
    """The backend and raw rows, the ratio line; True when the target is met."""
    summary = {side: medians(rows) for side, rows in results.items()}
    for side in ("backend", "raw"):
        rate, p50, p99 = summary[side]
        rounds = " ".join(f"{row[0]:.0f}" for row in results[side])
        print(f"{store:<28} {side:<8} {rate:>9.0f} {p50:>8.3f} {p99:>8.3f}  {rounds}")
    ratio = summary["backend"][0] / summary["raw"][0]
    verdict = "PASS" if ratio >= TARGET else "MISS"
    print(f"{store:<28} ratio backend/raw = {ratio:.1%} (target >= {TARGET:.0%}: {verdict})")
    print(f"{'':<28} raw = {raw_is}", flush=True)
    return ratio >= TARGET


def print_variants(results: dict[str, list[Stats]]) -> None:
    """Backend-only rows: median claims/s (min-max), p50, p99."""
    print(f"{'variant (backend only)':<44} {'claims/s (min-max)':>20} {'p50 ms':>8} {'p99 ms':>8}")
    for label, rows in results.items():
        rate, p50, p99 = medians(rows)
        low, high = min(r[0] for r in rows), max(r[0] for r in rows)
        spread = f"{rate:.0f} ({low:.0f}-{high:.0f})"
        print(f"{label:<44} {spread:>20} {p50:>8.3f} {p99:>8.3f}", flush=True)


class GenericPostgresBackend(PostgresBackend):
    """PostgresBackend without the server-side function: the generic claim transaction."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._claim_sql = None


async def install(backend: SqlBackend) -> None:
    """Create the tables (and the claim function) with a throw-away backend."""
    await backend.init()
    await backend.close()


async def bench_postgres(
    dsn: str, seconds: float, rounds: int, variants: bool, preinstall: bool
) -> bool:
    if preinstall:
        await install(PostgresBackend(dsn, pool_size=1))
    backend = PostgresBackend(dsn)
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    extra: list[SqlBackend] = []
    try:
        await backend.init()
        sql = claim_function_sql(backend)
        version = (await (await conn.execute("SHOW server_version")).fetchall())[0][0]
        results = await interleave(
            {
                "backend": lambda: backend_claim(backend),
                "raw": lambda: raw_postgres_claim(conn, sql),
            },
            seconds,
            rounds,
        )
        ok = print_comparison(
            f"PostgreSQL {version.split()[0]}",
            results,
            f"{sql.split(' FROM ')[1].split('(')[0]}(...) with the same 9 parameters,"
            " one statement on a psycopg AsyncConnection (autocommit)",
        )
        if variants:
            pooled = PostgresBackend(dsn, pool_size=8)
            generic = GenericPostgresBackend(dsn, pool_size=1)
            extra += [pooled, generic]
            for b in extra:
                await b.init()
            labels = {
                "PG claim_v1(), 1 task": (backend, 1),
                "PG claim_v1(), 8 tasks, pool 8": (pooled, 8),
                "PG generic transaction, 1 task": (generic, 1),
            }
            variant_results: dict[str, list[Stats]] = {label: [] for label in labels}
            for _ in range(rounds):
                for label, (b, tasks) in labels.items():
                    stats = await timed(backend_claim(b), seconds, tasks)
                    variant_results[label].append(stats)
            print_variants(variant_results)
        return ok
    finally:
        for b in extra:
            await b.close()
        await backend.close()
        await conn.close()


async def _open_raw_sqlite(path: str, synchronous: str, timeout: float) -> aiosqlite.Connection:
    """A connection set up like the backend's (autocommit, busy timeout, synchronous)."""
    conn = await aiosqlite.connect(path, isolation_level=None, timeout=timeout)
    await conn.execute_fetchall(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    await conn.execute_fetchall(f"PRAGMA synchronous = {synchronous.upper()}")
    return conn


async def bench_sqlite(
    path: str, synchronous: str, seconds: float, rounds: int, variants: bool, preinstall: bool
) -> bool:
    if preinstall:
        await install(SqliteBackend(path))  # also switches the file to WAL (persistent)
    backend = SqliteBackend(path, synchronous=synchronous)
    await backend.init()
    conn = await _open_raw_sqlite(path, synchronous, backend.timeout)
    extra: list[SqlBackend] = []
    try:
        mode = next(iter(await conn.execute_fetchall("PRAGMA journal_mode")))[0]
        results = await interleave(
            {
                "backend": lambda: backend_claim(backend),
                "raw": lambda: raw_sqlite_claim(conn, backend),
            },
            seconds,
            rounds,
        )
        ok = print_comparison(
            f"SQLite {sqlite3.sqlite_version} {mode} sync={synchronous}",
            results,
            "BEGIN IMMEDIATE; SELECT clock; SELECT run row; INSERT run; INSERT claim; COMMIT"
            " (the backend's statements, one transaction, aiosqlite)",
        )
        if variants:
            other_sync = "normal" if synchronous == "full" else "full"
            other = SqliteBackend(path, synchronous=other_sync)
            extra.append(other)
            await other.init()
            variant_results = await interleave(
                {
                    f"SQLite synchronous={synchronous}, 1 task": lambda: backend_claim(backend),
                    f"SQLite synchronous={other_sync}, 1 task": lambda: backend_claim(other),
                },
                seconds,
                rounds,
            )
            print_variants(variant_results)
        return ok
    finally:
        for b in extra:
            await b.close()
        await backend.close()
        await conn.close()


# Batched claims ------------------------------------------------------------------


async def timed_batches(run: RunBatch, seconds: float, size: int, warmup: int = 3) -> BatchStats:
    """Run chunks back to back for ``seconds`` (after ``warmup`` chunks); claims/s, latency, CPU."""
    for i in range(warmup):
        await run(-1 - i)
    latencies: list[float] = []
    perf = time.perf_counter
    cpu0, start = time.process_time(), perf()
    i = 0
    while True:
        t0 = perf()
        await run(i)
        t1 = perf()
        latencies.append(t1 - t0)
        i += 1
        if t1 - start >= seconds:
            break
    cpu, elapsed = time.process_time() - cpu0, perf() - start
    claims = len(latencies) * size
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return claims / elapsed, p50, p99, cpu / claims * 1e6


def _batch_claims(jobs: list[str], i: int, side: str) -> list[RunClaim]:
    slot = _slot(i)
    return [
        RunClaim(job, slot, f"{side}{i}", side, LEASE_MS, MAX_ATTEMPTS, overlap=True)
        for job in jobs
    ]


def _jobs(size: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [f"batch-{tag}-{k}" for k in range(size)]


def backend_batch(backend: SqlBackend, size: int) -> RunBatch:
    """``backend.runs.claim_many()`` of one new slot of ``size`` jobs."""
    jobs, runs = _jobs(size), backend.runs

    async def run(i: int) -> None:
        outcomes = await runs.claim_many(_batch_claims(jobs, i, "backend"))
        if not all(o.won for o in outcomes):
            raise AssertionError([o for o in outcomes if not o.won][:3])

    return run


def fallback_batch(backend: SqlBackend, size: int) -> RunBatch:
    """The base class's ``RunStore.claim_many``: single claims under bounded concurrency."""
    jobs, runs = _jobs(size), backend.runs

    async def run(i: int) -> None:
        outcomes = await RunStore.claim_many(runs, _batch_claims(jobs, i, "fallback"))
        if not all(o.won for o in outcomes):
            raise AssertionError([o for o in outcomes if not o.won][:3])

    return run


def raw_postgres_batch(
    conn: psycopg.AsyncConnection[Any], backend: PostgresBackend, size: int
) -> RunBatch:
    """The backend's ``claim_many_v3`` statement with the same eleven arrays, on a psycopg connection."""
    statement = backend.dialect.claim_many_statement(backend.tables)
    assert statement is not None
    sql = backend.dialect.placeholders(statement)
    jobs = _jobs(size)

    async def run(i: int) -> None:
        slot, token = _slot(i), f"raw{i}"
        params = (
            jobs,
            [slot] * size,
            [token] * size,
            ["raw"] * size,
            [LEASE_MS] * size,
            [MAX_ATTEMPTS] * size,
            [True] * size,
            [None] * size,
            [True] * size,
            [None] * size,
            [False] * size,
        )
        cur = await conn.execute(sql, params)
        rows = await cur.fetchall()
        if len(rows) != size or any(row[1] != "won" for row in rows):
            raise AssertionError(rows[:3])

    return run


def raw_sqlite_batch(conn: aiosqlite.Connection, backend: SqliteBackend, size: int) -> RunBatch:
    """The backend's claim statements for every item, one BEGIN IMMEDIATE, one hop to the thread."""
    s = backend._sql
    jobs = _jobs(size)

    def work(slot: int, token: str) -> None:
        raw: sqlite3.Connection = conn._conn
        raw.execute("BEGIN IMMEDIATE")
        try:
            for job in jobs:
                now = int(raw.execute(s.now).fetchone()[0])
                if raw.execute(s.run_row, (job, slot)).fetchall():
                    raise AssertionError(f"slot {slot} already claimed")
                run_row = (
                    job,
                    slot,
                    1,
                    MAX_ATTEMPTS,
                    token,
                    "running",
                    "raw",
                    now + LEASE_MS,
                    now,
                    None,
                )
                raw.execute(s.insert_run, run_row)
                raw.execute(s.insert_claim, (job, token, slot, 1, "raw", now, 0))
        except BaseException:
            raw.rollback()
            raise
        raw.commit()

    async def run(i: int) -> None:
        execute: Any = conn._execute  # aiosqlite: run a function on its thread
        await execute(work, _slot(i), f"raw{i}")

    return run


class CallCounter:
    """Wraps a backend's client and counts what reaches the store (see ``round_trips``)."""

    def __init__(self, inner: Any, per_transaction: int) -> None:
        self.inner = inner
        self.per_transaction = per_transaction
        self.trips = 0

    async def all(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        self.trips += 1
        rows: list[tuple[Any, ...]] = await self.inner.all(sql, params)
        return rows

    async def transaction(self, fn: Any) -> Any:
        self.trips += self.per_transaction
        return await self.inner.transaction(self._counted(fn))

    def _counted(self, fn: Any) -> Any:
        outer = self

        class Bound:
            def __init__(self, tx: Any) -> None:
                self.tx = tx

            async def all(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
                outer.trips += 1
                rows: list[tuple[Any, ...]] = await self.tx.all(sql, params)
                return rows

            async def transaction(self, inner_fn: Any) -> Any:
                return await inner_fn(self)

        return lambda tx: fn(Bound(tx))

    def __getattr__(self, name: str) -> Any:
        if name == "inline_transaction" and hasattr(self.inner, name):
            inline = self.inner.inline_transaction

            async def counted(fn: Any) -> Any:
                self.trips += 1
                return await inline(fn)

            return counted
        raise AttributeError(name)


async def round_trips(backend: SqlBackend, size: int, per_transaction: int) -> tuple[float, float]:
    """Store round trips per job-slot of one cycle (claim, finish, save): single vs batched."""
    assert backend._client is not None
    counter = CallCounter(backend._client, per_transaction)
    backend._client = counter
    try:
        answers = []
        for batched in (False, True):
            jobs = _jobs(size)
            claims = _batch_claims(jobs, 10**6, "trips")
            finishes = [RunFinish(c.job, c.slot, c.token, "ok") for c in claims]
            writes = [
                ResultWrite(
                    c.job,
                    StoredResult(c.slot, c.token, c.instance_id, "ok", c.slot, c.slot + 1, None),
                )
                for c in claims
            ]
            counter.trips = 0
            if batched:
                await backend.runs.claim_many(claims)
                await backend.runs.finish_many(finishes)
                await backend.save_results(writes)
            else:
                for c, f, w in zip(claims, finishes, writes, strict=True):
                    await backend.runs.claim(c)
                    await backend.runs.finish(f.job, f.slot, f.token, f.status)
                    await backend.save_result(w.job, w.result, w.history_size)
            answers.append(counter.trips / size)
        return answers[0], answers[1]
    finally:
        backend._client = counter.inner


def print_batches(store: str, results: dict[str, list[BatchStats]], size: int, raw_is: str) -> bool:
    """The batched rows and the backend/raw ratio; True when the target is met."""
    print(
        f"{store + f' (chunks of {size})':<40} {'side':<9} {'claims/s':>9} {'p50 ms':>8}"
        f" {'p99 ms':>8} {'CPU us/claim':>12}"
    )
    summary: dict[str, float] = {}
    for side, rows in results.items():
        rate, p50, p99, cpu = (statistics.median(col) for col in zip(*rows, strict=True))
        summary[side] = rate
        rounds = " ".join(f"{row[0]:.0f}" for row in rows)
        print(f"{'':<40} {side:<9} {rate:>9.0f} {p50:>8.2f} {p99:>8.2f} {cpu:>12.1f}  {rounds}")
    ratio = summary["backend"] / summary["raw"]
    verdict = "PASS" if ratio >= TARGET else "MISS"
    print(f"{'':<40} ratio backend/raw = {ratio:.1%} (target >= {TARGET:.0%}: {verdict})")
    print(f"{'':<40} batched/fallback = {summary['backend'] / summary['fallback']:.1f}x")
    print(f"{'':<40} raw = {raw_is}", flush=True)
    return ratio >= TARGET


async def interleave_batches(
    sides: dict[str, Callable[[], RunBatch]], seconds: float, rounds: int, size: int
) -> dict[str, list[BatchStats]]:
    """``rounds`` rounds of every side (new jobs each), the order rotating per round."""
    names = list(sides)
    results: dict[str, list[BatchStats]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(await timed_batches(sides[name](), seconds, size))
    return results


async def bench_postgres_batches(dsn: str, seconds: float, rounds: int, size: int) -> bool:
    await install(PostgresBackend(dsn, pool_size=1))
    backend = PostgresBackend(dsn)
    backend.batch_size = size
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        await backend.init()
        version = (await (await conn.execute("SHOW server_version")).fetchall())[0][0]
        results = await interleave_batches(
            {
                "backend": lambda: backend_batch(backend, size),
                "raw": lambda: raw_postgres_batch(conn, backend, size),
                "fallback": lambda: fallback_batch(backend, size),
            },
            seconds,
            rounds,
            size,
        )
        ok = print_batches(
            f"PostgreSQL {version.split()[0]}",
            results,
            size,
            "claim_many_v1(...) with the same 9 arrays, one statement on a psycopg AsyncConnection",
        )
        single, batched = await round_trips(backend, size, per_transaction=2)
        print(
            f"{'':<40} round trips per job-slot (claim+finish+save): single {single:.2f},"
            f" batched {batched:.4f}",
            flush=True,
        )
        return ok
    finally:
        await backend.close()
        await conn.close()


async def bench_sqlite_batches(
    path: str, synchronous: str, seconds: float, rounds: int, size: int
) -> bool:
    await install(SqliteBackend(path))
    backend = SqliteBackend(path, synchronous=synchronous)
    backend.batch_size = size
    await backend.init()
    conn = await _open_raw_sqlite(path, synchronous, backend.timeout)
    try:
        results = await interleave_batches(
            {
                "backend": lambda: backend_batch(backend, size),
                "raw": lambda: raw_sqlite_batch(conn, backend, size),
                "fallback": lambda: fallback_batch(backend, size),
            },
            seconds,
            rounds,
            size,
        )
        ok = print_batches(
            f"SQLite {sqlite3.sqlite_version} sync={synchronous}",
            results,
            size,
            "the backend's statements for each claim in one BEGIN IMMEDIATE, one hop to"
            " aiosqlite's thread (sqlite3 underneath)",
        )
        single, batched = await round_trips(backend, size, per_transaction=1)
        print(
            f"{'':<40} calls into the SQLite thread per job-slot (claim+finish+save):"
            f" single {single:.2f}, batched {batched:.4f}",
            flush=True,
        )
        return ok
    finally:
        await backend.close()
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one side's round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per side")
    parser.add_argument("--store", choices=("postgres", "sqlite", "both"), default="both")
    parser.add_argument("--synchronous", choices=("full", "normal"), default="full")
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also: PG 8 tasks on a pool of 8, PG generic transaction, the other SQLite sync",
    )
    parser.add_argument(
        "--install-inline",
        action="store_true",
        help="let the measured backend create the tables itself (on its own connection)",
    )
    parser.add_argument("--mode", choices=("single", "batch", "both"), default="both")
    parser.add_argument("--batch", type=int, default=500, help="claims per chunk (--mode batch)")
    args = parser.parse_args()
    print(
        "lease claims, sequential, one connection, new slot per claim;"
        f" {args.rounds} interleaved rounds x {args.seconds:g} s per side; medians;"
        f" tables created {'by the measured backend' if args.install_inline else 'beforehand'}",
        flush=True,
    )
    pre = not args.install_inline
    single, batch = args.mode in ("single", "both"), args.mode in ("batch", "both")
    if single:
        print(f"{'store':<28} {'side':<8} {'claims/s':>9} {'p50 ms':>8} {'p99 ms':>8}  per round")
    if args.store in ("postgres", "both"):
        server = start_postgres(fsync=True)
        try:
            if single:
                asyncio.run(
                    bench_postgres(server.dsn, args.seconds, args.rounds, args.variants, pre)
                )
            if batch:
                asyncio.run(
                    bench_postgres_batches(server.dsn, args.seconds, args.rounds, args.batch)
                )
        finally:
            server.stop()
    if args.store in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="anarchon-bench-") as tmp:
            path = os.path.join(tmp, "claims.db")
            if single:
                asyncio.run(
                    bench_sqlite(
                        path, args.synchronous, args.seconds, args.rounds, args.variants, pre
                    )
                )
            if batch:
                asyncio.run(
                    bench_sqlite_batches(
                        path, args.synchronous, args.seconds, args.rounds, args.batch
                    )
                )


if __name__ == "__main__":
    main()
