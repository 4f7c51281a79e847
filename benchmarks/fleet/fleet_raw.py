"""The claim reference of ``benchmarks/fleet/fleet.py``: the backend's batch claim beside the raw claim.

Every side claims new ``(job, slot)`` items (distinct jobs, one slot: a burst
of due jobs; the winning path) on the fleet's server, in the benchmark's own
process, measured the same way as the fleet (``time.process_time()`` deltas
for CPU, the same store counters for round trips):

- ``backend``: ``RunStore.claim_many`` (lease stores) or ``Backend.claim_many``
  (NATS) in chunks, with the scheduler's claim options (``overlap=False``,
  deadline = slot + 60 s, ``max_attempts=3``). Printed as *native* when the
  installed backend overrides the member, *fallback* when it inherits the
  base class's per-item fallback.
- ``raw batched``: the backend's claim without the backend's Python, batched by
  the driver, one batch per chunk — the same physical operation the backend
  sends: Redis, one ``EVALSHA`` of the backend's batch claim script per chunk
  (every item's KEYS and ARGV in the backend's layout), the chunks in one
  redis-py pipeline; PostgreSQL, one ``claim_many_v2(arrays)`` statement per
  chunk (psycopg, autocommit, the arrays as literals like the backend); SQLite, the backend's claim statements for the whole chunk
  in one ``BEGIN IMMEDIATE`` transaction (aiosqlite); NATS, ``js.publish`` with
  ``Nats-Msg-Id`` for the whole chunk, acks awaited together.
- ``raw single``: the same claim one at a time, each awaited (time-bounded).

The raw sides reach into the installed backend for its script, statement or
stream layout (``_runtime``, ``_sql``, ``dialect``...); if those moved, the
side is reported as unavailable with the reason instead of failing the run.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import fleet_counting
from fleet_stores import Snapshot, Store

LEASE_MS = 30_000
MAX_LATE_MS = 60_000
MAX_ATTEMPTS = 3
HISTORY_SIZE = 1000

Item = tuple[str, int, str]
"""``(job, slot, token)``."""

Batch = Callable[[Sequence[Item]], Awaitable[None]]


@dataclass
class Side:
    """The figures of one side: items, wall seconds, CPU seconds and per-item store figures."""

    name: str
    how: str
    items: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    figures: dict[str, float] = field(default_factory=dict)
    error: str = ""

    @property
    def rate(self) -> float:
        """Claims per second (wall)."""
        return self.items / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_us(self) -> float:
        """Client CPU µs per claim."""
        return self.cpu_s * 1e6 / self.items if self.items else 0.0


def _items(tag: str, count: int, slot: int) -> list[Item]:
    return [(f"r{tag}{n:06d}", slot, uuid.uuid4().hex) for n in range(count)]


async def _measure(
    store: Store, side: Side, batch: Batch, items: list[Item], chunk: int, seconds: float
) -> None:
    """Run ``batch`` over ``items`` in chunks until done or ``seconds`` passed; add to ``side``."""
    before: Snapshot = store.snapshot()
    client0 = fleet_counting.snapshot()
    cpu0, t0 = time.process_time(), time.perf_counter()
    done = 0
    stop = t0 + seconds
    for first in range(0, len(items), chunk):
        part = items[first : first + chunk]
        await batch(part)
        done += len(part)
        if time.perf_counter() >= stop:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    client1 = fleet_counting.snapshot()
    after = store.snapshot()
    delta = {k: v - client0.get(k, 0.0) for k, v in client1.items()}
    figures = store.figures(before, after, delta, done)
    total = side.items + done
    for key, value in figures.items():  # item-weighted mean over the rounds
        side.figures[key] = (side.figures.get(key, 0.0) * side.items + value * done) / total
    side.items, side.wall_s, side.cpu_s = total, side.wall_s + wall, side.cpu_s + cpu


def native(backend: Any) -> tuple[str, bool]:
    """Which batch member the backend's claims go through, and whether it is its own."""
    from anarchon.backend import Backend, RunStore

    runs = backend.runs
    if runs is not None:
        return "RunStore.claim_many", type(runs).claim_many is not RunStore.claim_many
    return "Backend.claim_many", type(backend).claim_many is not Backend.claim_many


def store_side_batch_ops(kind: str, url: str) -> str:
    """Batch scripts or functions the installed backend brings (informative; not called raw).

    Redis: the lease scripts of ``anarchon_redis._lua`` that take a batch (one
    call per chunk); PostgreSQL: the functions named like a claim in the database.
    The raw batched side sends the same batch claim (the Redis script, the
    PostgreSQL ``claim_many_v2``) with the backend's argument layout, but built
    directly from the items, without the backend's Python.
    """
    try:
        if kind == "redis":
            from anarchon_redis import _lua

            batch = (_lua.LEASE_CLAIM, _lua.LEASE_HEARTBEAT, _lua.LEASE_FINISH, _lua.LEASE_SAVE)
            names = [script.name for script in batch]
            return f"lease scripts {', '.join(names)} (each call carries a chunk of items)"
        if kind == "postgres":
            import psycopg

            with psycopg.connect(url) as conn:
                rows = conn.execute(
                    "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                    " WHERE n.nspname = current_schema() AND p.proname LIKE '%claim%'"
                    " ORDER BY 1"
                ).fetchall()
            return ", ".join(str(r[0]) for r in rows) or "none"
    except Exception as error:  # informative only
        return f"unknown ({type(error).__name__}: {error})"
    return "n/a (no server-side code)"


def _backend_batch(backend: Any, instance: str) -> Batch:
    from anarchon.types import ClaimInput, RunClaim

    runs = backend.runs

    async def lease(part: Sequence[Item]) -> None:
        outcomes = await runs.claim_many(
            [
                RunClaim(
                    job,
                    slot,
                    token,
                    instance,
                    LEASE_MS,
                    MAX_ATTEMPTS,
                    False,
                    slot + MAX_LATE_MS,
                    True,
                    HISTORY_SIZE,
                    None,
                )
                for job, slot, token in part
            ]
        )
        lost = [o for o in outcomes if o.kind != "won"]
        if lost:
            raise AssertionError(f"backend claim_many: {len(lost)} not won, e.g. {lost[0]}")

    async def plain(part: Sequence[Item]) -> None:
        won = await backend.claim_many(
            [
                ClaimInput(job, slot, token, instance, HISTORY_SIZE, None)
                for job, slot, token in part
            ]
        )
        if not all(won):
            raise AssertionError(f"backend claim_many: {won.count(False)} not won")

    return lease if runs is not None else plain


class Raw:
    """The raw claim of one store: ``single`` and ``batch`` over items; ``how`` says what."""

    how_single = ""
    how_batch = ""

    async def open(self, url: str, backend: Any) -> None:
        raise NotImplementedError

    async def single(self, part: Sequence[Item]) -> None:
        raise NotImplementedError

    async def batch(self, part: Sequence[Item]) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        return None


class RedisRaw(Raw):
    how_single = "EVALSHA of the backend's claim script, one item per call (redis-py)"
    how_batch = (
        "EVALSHA of the backend's batch claim script, one call per chunk with every item's"
        " KEYS and ARGV (the backend's layout), the calls in one redis-py pipeline"
    )

    async def open(self, url: str, backend: Any) -> None:
        import redis.asyncio as driver
        from anarchon_redis import _lua
        from anarchon_redis._batch import CHUNK

        self.runtime = backend._runtime
        self.sha = _lua.LEASE_CLAIM.sha
        self.chunk = CHUNK
        self.client = driver.Redis.from_url(url)
        await self.client.script_load(_lua.LEASE_CLAIM.source)

    def _profile(self, job: str) -> list[Any]:
        """The settings every claim of a call shares (sent once), as the backend sends them."""
        return [
            "raw",
            LEASE_MS,
            MAX_ATTEMPTS,
            0,
            1,
            HISTORY_SIZE,
            self.runtime.keep_ms(job),
            "",
            "",
            0,  # overlap_wait
        ]

    def _call(self, part: Sequence[Item]) -> list[Any]:
        """One ``EVALSHA`` of the batch claim script for ``part`` (KEYS, one profile, items)."""
        keys: list[Any] = []
        args: list[Any] = [1, *self._profile(part[0][0])]
        for job, slot, token in part:
            keys.extend(self.runtime.keys(job))
            args.extend((slot, token, slot + MAX_LATE_MS, 1))
        return ["EVALSHA", self.sha, len(keys), *keys, *args]

    @staticmethod
    def _check(reply: Any) -> None:
        """Every item of one call's reply (one answer per item) must be won (an integer)."""
        if any(type(answer) is not int for answer in reply):
            raise AssertionError(reply[:3])

    async def single(self, part: Sequence[Item]) -> None:
        for item in part:
            self._check(await self.client.execute_command(*self._call([item])))  # type: ignore[no-untyped-call]

    async def batch(self, part: Sequence[Item]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for first in range(0, len(part), self.chunk):
            pipe.execute_command(*self._call(part[first : first + self.chunk]))
        for reply in await pipe.execute():
            self._check(reply)

    async def close(self) -> None:
        await self.client.aclose()


class PostgresRaw(Raw):
    how_single = "the backend's claim_v2() statement, one at a time (psycopg, autocommit)"
    how_batch = (
        "the backend's claim_many_v2(arrays) statement, one per chunk (psycopg, autocommit),"
        " the arrays as literals, as the backend sends them"
    )

    async def open(self, url: str, backend: Any) -> None:
        import psycopg

        dialect, tables = backend.dialect, backend.tables
        sql, many = dialect.claim_statement(tables), dialect.claim_many_statement(tables)
        if sql is None or many is None:
            raise RuntimeError("the backend has no claim or batch claim statement")
        self.sql = dialect.placeholders(sql)
        self.many = dialect.placeholders(many)
        self.conn = await psycopg.AsyncConnection.connect(url, autocommit=True)

    def _params(self, item: Item) -> tuple[Any, ...]:
        job, slot, token = item
        return (
            job,
            slot,
            token,
            "raw",
            LEASE_MS,
            MAX_ATTEMPTS,
            False,
            slot + MAX_LATE_MS,
            True,
            None,
            False,
        )

    async def single(self, part: Sequence[Item]) -> None:
        for item in part:
            cur = await self.conn.execute(self.sql, self._params(item))
            row = await cur.fetchone()
            if row is None or row[0] != "won":
                raise AssertionError(row)

    async def batch(self, part: Sequence[Item]) -> None:
        columns = list(zip(*(self._params(item) for item in part), strict=True))
        from anarchon_sql.postgres._arrays import array_literal

        cur = await self.conn.execute(
            self.many, [array_literal(list(column)) for column in columns]
        )
        rows = await cur.fetchall()
        if len(rows) != len(part) or any(row[1] != "won" for row in rows):
            raise AssertionError(rows[:3])

    async def close(self) -> None:
        await self.conn.close()


class SqliteRaw(Raw):
    how_single = "the backend's claim statements in one BEGIN IMMEDIATE per claim (aiosqlite)"
    how_batch = "the backend's claim statements for the whole chunk in one BEGIN IMMEDIATE"

    async def open(self, url: str, backend: Any) -> None:
        import aiosqlite

        self.s = backend._sql
        self.conn = await aiosqlite.connect(backend.path, isolation_level=None, timeout=30)
        await self.conn.execute_fetchall("PRAGMA busy_timeout = 30000")
        await self.conn.execute_fetchall(f"PRAGMA synchronous = {backend.synchronous.upper()}")

    async def _claim(self, now: int, item: Item) -> None:
        job, slot, token = item
        fetch, s = self.conn.execute_fetchall, self.s
        if list(await fetch(s.run_row, (job, slot))):
            raise AssertionError(f"{job} {slot} already claimed")
        if list(await fetch(s.live_older, (job, slot, now))):  # overlap=False, as the scheduler
            raise AssertionError(f"{job} has a live older run")
        run = (job, slot, 1, MAX_ATTEMPTS, token, "running", "raw", now + LEASE_MS, now, None)
        await fetch(s.insert_run, run)
        await fetch(s.insert_claim, (job, token, slot, 1, "raw", now, 0))

    async def _transaction(self, part: Sequence[Item]) -> None:
        await self.conn.execute("BEGIN IMMEDIATE")
        try:
            now = int(next(iter(await self.conn.execute_fetchall(self.s.now, ())))[0])
            for item in part:
                await self._claim(now, item)
        except BaseException:
            await self.conn.rollback()
            raise
        await self.conn.commit()

    async def single(self, part: Sequence[Item]) -> None:
        for item in part:
            await self._transaction([item])

    async def batch(self, part: Sequence[Item]) -> None:
        await self._transaction(part)

    async def close(self) -> None:
        await self.conn.close()


class NatsRaw(Raw):
    how_single = "js.publish with Nats-Msg-Id, one at a time (nats-py)"
    how_batch = "js.publish with Nats-Msg-Id for the whole chunk, acks awaited together"

    async def open(self, url: str, backend: Any) -> None:
        import nats
        from anarchon_nats import NatsBackend

        self.stream_owner = NatsBackend(url, stream="FLEETRAW", prefix="fleetraw.")
        await self.stream_owner.init()  # the raw stream, with the backend's settings
        self.nc = await nats.connect(url)
        self.js = self.nc.jetstream()

    async def _one(self, item: Item) -> None:
        job, slot, token = item
        ack = await self.js.publish(
            f"fleetraw.{job}.claims", token.encode(), headers={"Nats-Msg-Id": f"{job}:{slot}"}
        )
        if ack.duplicate:
            raise AssertionError(ack)

    async def single(self, part: Sequence[Item]) -> None:
        for item in part:
            await self._one(item)

    async def batch(self, part: Sequence[Item]) -> None:
        await asyncio.gather(*(self._one(item) for item in part))

    async def close(self) -> None:
        await self.nc.close()
        await self.stream_owner.close()


RAWS: dict[str, type[Raw]] = {
    "redis": RedisRaw,
    "postgres": PostgresRaw,
    "sqlite": SqliteRaw,
    "nats": NatsRaw,
}


async def reference(
    store: Store, url: str, items: int, chunk: int, seconds: float, rounds: int = 2
) -> list[Side]:
    """The backend's batch claim, the raw batched claim and the raw single claim on ``url``."""
    from anarchon.backend.registry import resolve_backend

    backend = resolve_backend(url)
    await backend.init()
    member, own = native(backend)
    sides = {
        "backend": Side("backend", f"{member} ({'native' if own else 'fallback: per-item'})"),
    }
    raw: Raw | None = None
    raw_class = RAWS.get(store.kind)
    if raw_class is not None:
        sides["raw batched"] = Side("raw batched", raw_class.how_batch)
        sides["raw single"] = Side("raw single", raw_class.how_single)
        raw = raw_class()
        try:
            await raw.open(url, backend)
        except Exception as error:  # the backend's internals moved: say so, go on
            for name in ("raw batched", "raw single"):
                sides[name].error = f"unavailable: {type(error).__name__}: {error}"
            raw = None
    slot = int(time.time()) * 1000  # deadline slot + 60 s: never late within a reference
    try:
        batches: dict[str, Batch] = {"backend": _backend_batch(backend, "bench-backend")}
        if raw is not None:
            batches["raw batched"] = raw.batch
        order = list(batches)
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                side = sides[name]
                try:
                    tag = f"{name[:1]}{r}"
                    await _measure(
                        store, side, batches[name], _items(tag, items, slot), chunk, seconds
                    )
                except Exception as error:
                    side.error = f"failed: {type(error).__name__}: {error}"
        if raw is not None:
            side = sides["raw single"]
            try:
                await _measure(store, side, raw.single, _items("s", items, slot), 1, seconds)
            except Exception as error:
                side.error = f"failed: {type(error).__name__}: {error}"
    finally:
        if raw is not None:
            await raw.close()
        await backend.close()
    return list(sides.values())
