"""Lease claims per second through the SQL backends vs the same claim SQL run raw.

    uv run python benchmarks/claims_sql.py [--seconds 2] [--rounds 5]
                                           [--store postgres|sqlite|both]
                                           [--synchronous full|normal] [--variants]
                                           [--install-inline]

Starts its own throw-away PostgreSQL (Debian's binaries, through
``packages/anarchon-sql/tests/sqltest_servers.py``; fsync and
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
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
from anarchon.types import RunClaim
from anarchon_sql import PostgresBackend, SqlBackend, SqliteBackend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages/anarchon-sql/tests"))

from sqltest_servers import start_postgres  # type: ignore[import-not-found,unused-ignore]

LEASE_MS = 60_000
MAX_ATTEMPTS = 3
SLOT_BASE = 1_700_000_000_000
TARGET = 0.70

Stats = tuple[float, float, float]
"""(claims/s, p50 ms, p99 ms)."""

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
        params = (job, _slot(i), f"t{i}", "raw", LEASE_MS, MAX_ATTEMPTS, True, None, True)
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
    args = parser.parse_args()
    print(
        "lease claims, sequential, one connection, new slot per claim;"
        f" {args.rounds} interleaved rounds x {args.seconds:g} s per side; medians;"
        f" tables created {'by the measured backend' if args.install_inline else 'beforehand'}",
        flush=True,
    )
    print(f"{'store':<28} {'side':<8} {'claims/s':>9} {'p50 ms':>8} {'p99 ms':>8}  per round")
    pre = not args.install_inline
    if args.store in ("postgres", "both"):
        server = start_postgres(fsync=True)
        try:
            asyncio.run(bench_postgres(server.dsn, args.seconds, args.rounds, args.variants, pre))
        finally:
            server.stop()
    if args.store in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="anarchon-bench-") as tmp:
            path = os.path.join(tmp, "claims.db")
            asyncio.run(
                bench_sqlite(path, args.synchronous, args.seconds, args.rounds, args.variants, pre)
            )


if __name__ == "__main__":
    main()
