"""What ``durability="replicated"`` costs per claim on PostgreSQL, beside the raw claim.

    uv run python benchmarks/claims/durability_sql.py [--claims 2000] [--rounds 3]

Starts a throw-away primary (fsync on) and a synchronous standby on loopback
(``anarchon_testservers.postgres``: ``pg_basebackup -R``,
``synchronous_standby_names = '*'``). The primary's own
``synchronous_commit`` is ``local``: a commit waits for the primary's disk
only, unless the transaction asks for more (as a primary with a synchronous
standby for some data and fast commits for the rest would be set up). Then,
each a new slot of one job, one call at a time on one connection:

- **raw**: the backend's claim statement (``SELECT ... FROM <p>claim_v3(...)``)
  on a psycopg ``AsyncConnection`` in autocommit: the floor;
- **fast**: ``backend.runs.claim()`` of ``PostgresBackend(durability="fast")``;
- **replicated**: the same with ``durability="replicated"``: the commit
  waits until the standby flushed it.

Prints the median per-claim latency of each (median of ``--rounds`` rounds;
rounds alternate the order) and the ratios to raw. The standby is on the same
host, so the figure is the cost of one more fsync and one loopback round trip
per claim; across a network add the round trip to the standby.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import psycopg
from anarchon.types import RunClaim
from anarchon_sql import PostgresBackend
from anarchon_testservers.postgres import start_postgres, start_standby


def _claim(job: str, slot: int) -> RunClaim:
    return RunClaim(job, slot, uuid.uuid4().hex, "bench", 60_000, overlap=True)


async def _backend_round(dsn: str, durability: str, prefix: str, n: int, base: int) -> float:
    backend = PostgresBackend(dsn, table_prefix=prefix, durability=durability, pool_size=1)
    await backend.init()
    job = f"{durability}-{uuid.uuid4().hex[:6]}"
    try:
        times = []
        for i in range(n):
            start = time.perf_counter()
            outcome = await backend.runs.claim(_claim(job, base + i))
            times.append(time.perf_counter() - start)
            assert outcome.won, outcome
        return statistics.median(times)
    finally:
        await backend.close()


async def _raw_round(dsn: str, sql: str, n: int, base: int) -> float:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    job = f"raw-{uuid.uuid4().hex[:6]}"
    try:
        times = []
        for i in range(n):
            c = _claim(job, base + i)
            params = (
                c.job,
                c.slot,
                c.token,
                c.instance_id,
                c.lease_ms,
                1,
                True,
                None,
                True,
                None,
                False,
            )
            start = time.perf_counter()
            cur = await conn.execute(sql, params)
            row = await cur.fetchone()
            times.append(time.perf_counter() - start)
            assert row is not None
            assert row[0] == "won", row
        return statistics.median(times)
    finally:
        await conn.close()


async def main(claims: int, rounds: int) -> None:
    primary = start_postgres(fsync=True)
    try:
        standby = start_standby(primary, synchronous=True)
        try:
            primary.psql("ALTER SYSTEM SET synchronous_commit = 'local'")
            primary.psql("SELECT pg_reload_conf()")
            prefix = "bench_"
            setup = PostgresBackend(primary.dsn, table_prefix=prefix)
            await setup.init()
            sql = setup._sql.calls.claim
            await setup.close()
            assert sql is not None
            results: dict[str, list[float]] = {"raw": [], "fast": [], "replicated": []}
            base = 1_000_000
            for r in range(rounds):
                order = ["raw", "fast", "replicated"]
                if r % 2:
                    order.reverse()
                for name in order:
                    base += claims
                    if name == "raw":
                        results[name].append(await _raw_round(primary.dsn, sql, claims, base))
                    else:
                        results[name].append(
                            await _backend_round(primary.dsn, name, prefix, claims, base)
                        )
            raw = statistics.median(results["raw"])
            print(
                f"PostgreSQL primary + synchronous standby on loopback, {claims} claims x {rounds} rounds"
            )
            print(f"{'claim':<12} {'p50 ms':>8} {'x raw':>7}")
            for name in ("raw", "fast", "replicated"):
                p50 = statistics.median(results[name])
                print(f"{name:<12} {p50 * 1000:8.3f} {p50 / raw:7.2f}")
            fast = statistics.median(results["fast"])
            replicated = statistics.median(results["replicated"])
            print(f"replicated / fast: {replicated / fast:.2f}")
        finally:
            standby.stop()
    finally:
        primary.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.claims, args.rounds))
