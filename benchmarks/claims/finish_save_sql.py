"""A wave's ends on the SQL backends: ``finish_and_save_many`` vs ``finish_many`` + ``save_results``.

    uv run --frozen --no-sync python benchmarks/claims/finish_save_sql.py [--runs 10000] [--rounds 2]

For PostgreSQL (a server this script starts, as the tests do) and SQLite
(WAL, a temporary file): ``--runs`` runs of distinct jobs are claimed, then
their ends are stored in chunks of 500, either in one call per chunk
(``RunStore.finish_and_save_many``: PostgreSQL ``finish_save_many_v1``,
SQLite one transaction) or two (``finish_many``, then ``Backend.save_results``:
what the scheduler sends to a store without the combined member). Printed per
run: wall time and this process's CPU (for SQLite that includes SQLite's own
work), and the ratio of the combined member to the two-call path.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid

from anarchon.backend import Backend
from anarchon.types import ResultWrite, RunClaim, RunFinish, StoredResult
from anarchon_sql import PostgresBackend, SqliteBackend
from anarchon_testservers.postgres import start_postgres

CHUNK = 500


async def _wave(backend: Backend, runs_n: int, combined: bool) -> tuple[float, float]:
    runs = backend.runs
    assert runs is not None
    now = await runs.now_ms()
    slot = now - now % 1000
    tag = uuid.uuid4().hex[:6]
    claims = [
        RunClaim(f"w{tag}{k}", slot, uuid.uuid4().hex, "bench", 30_000, 3, True, slot + 60_000)
        for k in range(runs_n)
    ]
    for first in range(0, runs_n, CHUNK):
        assert all(o.won for o in await runs.claim_many(claims[first : first + CHUNK]))
    finishes = [RunFinish(c.job, c.slot, c.token, "ok") for c in claims]
    writes = [
        ResultWrite(c.job, StoredResult(c.slot, c.token, "bench", "ok", slot, slot + 1, None, 1))
        for c in claims
    ]
    cpu, wall = time.process_time(), time.perf_counter()
    for first in range(0, runs_n, CHUNK):
        part, results = finishes[first : first + CHUNK], writes[first : first + CHUNK]
        if combined:
            answers = await runs.finish_and_save_many(part, results)
            assert answers is not None
            assert all(answers)
        else:
            assert all(await runs.finish_many(part))
            await backend.save_results(results)
    return (time.perf_counter() - wall) / runs_n * 1e6, (time.process_time() - cpu) / runs_n * 1e6


async def _store(name: str, backend: Backend, runs_n: int, rounds: int) -> None:
    await backend.init()
    try:
        figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(rounds):
            for combined in (False, True):
                figures[combined].append(await _wave(backend, runs_n, combined))
    finally:
        await backend.close()
    best = {k: (min(w for w, _c in v), min(c for _w, c in v)) for k, v in figures.items()}
    for combined, label in ((False, "finish_many + save_results"), (True, "finish_and_save_many")):
        wall, cpu = best[combined]
        print(f"{name:<11} {label:<28} {wall:8.1f} µs wall {cpu:8.1f} µs CPU per run")
    print(
        f"{name:<11} ratio combined / two calls: wall {best[True][0] / best[False][0]:.2f},"
        f" CPU {best[True][1] / best[False][1]:.2f} (best of {rounds} rounds of {runs_n:,} runs)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    server = start_postgres()
    try:
        await _store("PostgreSQL", PostgresBackend.from_url(server.dsn), args.runs, args.rounds)
    finally:
        server.stop()
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteBackend.from_url(f"sqlite:///{tmp}/bench.db")
        await _store("SQLite", sqlite, args.runs, args.rounds)


if __name__ == "__main__":
    asyncio.run(main())
