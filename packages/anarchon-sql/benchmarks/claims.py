"""Lease claims per second of the SQL backends (each claim on a new slot).

    uv run python packages/anarchon-sql/benchmarks/claims.py [--seconds 3] [--runs 3]

Starts its own PostgreSQL (Debian's binaries, fsync and synchronous_commit ON,
like the anchors in shared/notes/stores.md) and uses a temp SQLite file.
Measured:

- PostgreSQL, the one-statement claim (``<prefix>claim_v1()``): sequential and
  8 concurrent tasks (pool of 8);
- PostgreSQL, the generic claim transaction (BEGIN, advisory lock, clock, row
  read ``FOR UPDATE``, inserts, COMMIT: 6-7 round trips), for comparison;
- SQLite (aiosqlite, WAL, ``BEGIN IMMEDIATE``), synchronous FULL and NORMAL.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from anarchon.types import RunClaim
from anarchon_sql import PostgresBackend, SqlBackend, SqliteBackend
from sqltest_servers import start_postgres  # type: ignore[import-not-found]


class GenericPostgresBackend(PostgresBackend):
    """PostgresBackend without the server-side function: the generic claim transaction."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._claim_sql = None


async def measure(backend: SqlBackend, seconds: float, tasks: int) -> tuple[float, float, float]:
    """(claims/s, p50 ms, p99 ms) of ``tasks`` concurrent claimers, each on fresh slots."""
    await backend.init()
    job = f"bench-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def worker(i: int) -> None:
        while time.perf_counter() < stop:
            slot = next(counter)
            claim = RunClaim(job, slot, f"t{slot}", f"i{i}", 60_000, overlap=True)
            t0 = time.perf_counter()
            outcome = await backend.runs.claim(claim)
            latencies.append(time.perf_counter() - t0)
            assert outcome.won

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(tasks)))
    elapsed = time.perf_counter() - t0
    await backend.close()
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    return len(latencies) / elapsed, p50, p99


def run(label: str, make: Callable[[], SqlBackend], seconds: float, runs: int, tasks: int) -> None:
    results = [asyncio.run(measure(make(), seconds, tasks)) for _ in range(runs)]
    rates = [r[0] for r in results]
    p50 = statistics.median(r[1] for r in results)
    p99 = statistics.median(r[2] for r in results)
    print(
        f"| {label} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
        f" | {p50:.2f} | {p99:.2f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    server = start_postgres(fsync=True)
    tmp = tempfile.mkdtemp(prefix="anarchon-bench-")
    try:
        dsn = server.dsn
        print("| store / path | claims/s median (min-max) | p50 ms | p99 ms |")
        print("|---|---|---|---|")
        run(
            "PG claim_v1(), 1 task",
            lambda: PostgresBackend(dsn, pool_size=1),
            args.seconds,
            args.runs,
            1,
        )
        run(
            "PG claim_v1(), 8 tasks, pool 8",
            lambda: PostgresBackend(dsn, pool_size=8),
            args.seconds,
            args.runs,
            8,
        )
        run(
            "PG generic transaction, 1 task",
            lambda: GenericPostgresBackend(dsn, pool_size=1),
            args.seconds,
            args.runs,
            1,
        )
        for sync in ("full", "normal"):
            path = os.path.join(tmp, f"{sync}.db")
            make = functools.partial(SqliteBackend, path, synchronous=sync)
            run(f"SQLite synchronous={sync}, 1 task", make, args.seconds, args.runs, 1)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
