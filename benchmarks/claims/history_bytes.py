"""How many bytes one run of history costs each store (docs/backends/redis.md, "Sizing history", and beside it for each store).

    uv run --frozen --no-sync python benchmarks/claims/history_bytes.py [--runs 3000] [--history-size 1000]

For each store (Redis and Valkey ``lease``, PostgreSQL, SQLite, NATS) a fresh
backend on a throw-away server runs ``--runs`` slots of one job one after
the other, as a scheduler does (claim, then finish with an ``ok`` result),
with ``history_size`` ``--history-size``: history is trimmed to it, so the
store holds about ``history_size`` runs of the job (plus the finished run
state its retention keeps). Then it measures what the job takes:

- Redis/Valkey: ``MEMORY USAGE`` of the job's keys (``SAMPLES 0``);
- PostgreSQL: ``pg_total_relation_size`` of the tables (indexes included),
  after ``VACUUM``, minus the same for an empty store;
- SQLite: the database file after ``VACUUM``, minus an empty store's;
- NATS: the stream's ``bytes`` (file store).

Printed: the runs history returns, the job's bytes, bytes per run, and what
1,000 such jobs hold. Stores trim in steps (Redis every few writes, SQL every
``history_size // 2`` saves), so a job holds between ``history_size`` and
about 1.5 times as many runs: run it with ``--runs`` 2500 and 2750 to see both. Job names are 20 characters, instance ids 10, no error
text: a handler's error text adds its length to each failed run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import ok_ends
from anarchon.backend import Backend
from anarchon.types import ClaimInput, RunClaim, StoredResult

BASE_SLOT = 1_700_000_000_000
JOB = "report-every-second-"  # 20 characters
INSTANCE = "web-000001"


async def _fill(backend: Backend, runs: int, history_size: int) -> None:
    await backend.init()
    await backend.prepare_job(JOB, history_size)
    store = backend.runs
    for n in range(runs):
        slot = BASE_SLOT + n * 1000
        token = uuid.uuid4().hex
        if store is not None:
            claim = RunClaim(JOB, slot, token, INSTANCE, 30_000, 1, False, None, True)
            await store.claim_many([claim])
            await store.finish_and_save_many(*ok_ends([claim], INSTANCE, history_size))
        else:
            await backend.claim(ClaimInput(JOB, slot, token, INSTANCE, history_size))
            result = StoredResult(slot, token, INSTANCE, "ok", slot, slot + 1)
            await backend.save_result(JOB, result, history_size)


async def _kept(backend: Backend) -> int:
    return len(await backend.history(JOB, 100_000))


async def redis_bytes(url: str, runs: int, size: int) -> tuple[int, int]:
    from anarchon_redis import RedisBackend, ValkeyBackend

    prefix = f"h{uuid.uuid4().hex[:6]}:"
    cls = ValkeyBackend if url.startswith("valkey") else RedisBackend
    backend = cls(url, prefix=prefix)
    await _fill(backend, runs, size)
    conn = await backend.connection()
    keys = await conn.execute("KEYS", "*" + prefix + JOB + "*")
    total = 0
    for key in keys:
        total += int(await conn.execute("MEMORY", "USAGE", key, "SAMPLES", "0") or 0)
    kept = await _kept(backend)
    await backend.close()
    return total, kept


async def sql_bytes(make: Any, measure: Any, runs: int, size: int) -> tuple[int, int]:
    empty = make()
    await empty.init()
    await empty.close()
    before = await measure()
    backend = make()
    await _fill(backend, runs, size)
    kept = await _kept(backend)
    await backend.close()
    return await measure() - before, kept


async def nats_bytes(url: str, runs: int, size: int) -> tuple[int, int]:
    import nats
    from anarchon_nats import NatsBackend

    stream = f"H{uuid.uuid4().hex[:6].upper()}"
    backend = NatsBackend(url, stream=stream, prefix=f"{stream.lower()}.", history_size=size)
    await _fill(backend, runs, size)
    kept = await _kept(backend)
    await backend.close()
    nc = await nats.connect(url)
    info = await nc.jetstream().stream_info(stream)
    await nc.close()
    return int(info.state.bytes), kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--history-size", type=int, default=1000)
    args = parser.parse_args()
    runs, size = args.runs, args.history_size
    rows: list[tuple[str, int, int]] = []

    from anarchon_testservers.redis import start_server as start_redis

    for kind in ("redis", "valkey"):
        server = start_redis(kind)
        try:
            total, kept = asyncio.run(redis_bytes(server.url, runs, size))
            rows.append((f"{kind} (lease)", total, kept))
        finally:
            server.stop()

    from anarchon_sql import PostgresBackend, SqliteBackend
    from anarchon_testservers.postgres import start_postgres

    pg = start_postgres()
    try:

        async def pg_size() -> int:
            import psycopg

            async with await psycopg.AsyncConnection.connect(pg.dsn, autocommit=True) as conn:
                await conn.execute("VACUUM")
                cur = await conn.execute(
                    "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE c.relkind = 'r' AND n.nspname = 'public'"
                    " AND c.relname LIKE 'anarchon_%'"
                )
                row = await cur.fetchone()
                return int(row[0]) if row else 0

        total, kept = asyncio.run(sql_bytes(lambda: PostgresBackend(pg.dsn), pg_size, runs, size))
        rows.append(("postgresql", total, kept))
    finally:
        pg.stop()

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "h.db")

        async def sqlite_size() -> int:
            import sqlite3

            with sqlite3.connect(path) as db:
                db.execute("VACUUM")
            return await asyncio.to_thread(os.path.getsize, path)

        total, kept = asyncio.run(sql_bytes(lambda: SqliteBackend(path), sqlite_size, runs, size))
        rows.append(("sqlite", total, kept))

    from anarchon_testservers.nats import start_server as start_nats

    server, _root = start_nats()
    try:
        total, kept = asyncio.run(nats_bytes(server.url, runs, size))
        rows.append(("nats (file store)", total, kept))
    finally:
        server.kill()
        shutil.rmtree(_root, ignore_errors=True)

    print(f"{runs} runs of one job, history_size {size}; job name 20 chars, instance id 10")
    print(f"{'store':<20} {'runs kept':>9} {'bytes/job':>10} {'B/run':>6} {'1,000 jobs':>11}")
    for name, total, kept in rows:
        per_run = total / max(kept, 1)
        print(f"{name:<20} {kept:>9} {total:>10} {per_run:>6.0f} {total * 1000 / 1e9:>8.2f} GB")


if __name__ == "__main__":
    main()
