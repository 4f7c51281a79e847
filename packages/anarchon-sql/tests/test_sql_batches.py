"""The batch members on every SQL path: a batch answers what its items answer one by one.

Two stores (two table prefixes on the same database) get the same start
state; one answers a batch, the other the same items one by one, and the
answers and the stored history must be equal. States mixed in: won, running,
done, overlap, late, none, takeover and attempts exhausted, repeated tokens,
chunks of 1 and 2, and the whole batch retried.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from anarchon.errors import BackendUnavailableError
from anarchon.types import (
    ClaimInput,
    ClaimOutcome,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    StoredResult,
)
from anarchon_sql import PostgresBackend, SqlBackend
from anarchon_sql.postgres import PsycopgClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sql_batch_support import PATHS, CountingClient, make_backend
from test_sql_contracts import load_example

JOBS = 2
SLOTS = 3
STATES = ("empty", "live", "expired", "expired_last", "done")


@dataclass(frozen=True)
class Item:
    job: int
    slot: int
    token: int
    create: bool
    overlap: bool
    deadline: str
    max_attempts: int


items_st = st.builds(
    Item,
    job=st.integers(0, JOBS - 1),
    slot=st.integers(0, SLOTS - 1),
    token=st.integers(0, 3),
    create=st.booleans(),
    overlap=st.booleans(),
    deadline=st.sampled_from(("none", "past", "future")),
    max_attempts=st.integers(1, 3),
)
states_st = st.lists(st.sampled_from(STATES), min_size=JOBS * SLOTS, max_size=JOBS * SLOTS)


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Which SQL path the batch runs on."""
    return str(request.param)


@pytest.fixture
def factory(path: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``factory(prefix, batch_size)``: a backend of the path on the test's store."""
    dsn = request.getfixturevalue("pg_dsn") if path.startswith("postgres") else ""
    example = load_example() if path == "example" else None

    def build(prefix: str, batch_size: int = 500) -> SqlBackend:
        return make_backend(
            path, dsn=dsn, tmp=str(tmp_path), prefix=prefix, example=example, batch_size=batch_size
        )

    return build


def _answer(outcome: ClaimOutcome) -> tuple[Any, ...]:
    """What must agree between a batch and single calls (lease times follow each store's clock)."""
    return (outcome.kind, outcome.attempt, outcome.runner, outcome.lease_expires_at is None)


class Scenario:
    """One start state and one list of claims, laid out the same on any store."""

    def __init__(self, states: list[str], items: list[Item]) -> None:
        self.tag = uuid.uuid4().hex[:8]
        self.states = states
        self.items = items
        self.base = 0

    def job(self, j: int) -> str:
        return f"b{self.tag}-{j}"

    def slot(self, s: int) -> int:
        return self.base + s * 1000

    async def set_up(self, backend: SqlBackend, now: int) -> None:
        self.base = now - 10_000
        runs = backend.runs
        for index, state in enumerate(self.states):
            job, slot = self.job(index // SLOTS), self.slot(index % SLOTS)
            if state == "empty":
                continue
            lease = 60_000 if state in ("live", "done") else 1
            attempts = 1 if state == "expired_last" else 3
            claim = RunClaim(job, slot, f"setup-{state}", "setup", lease, attempts, overlap=True)
            assert (await runs.claim(claim)).won
            if state == "done":
                assert await runs.finish(job, slot, f"setup-{state}", "ok")

    def claims(self) -> list[RunClaim]:
        deadlines = {"none": None, "past": self.base - 1000, "future": self.base + 120_000}
        return [
            RunClaim(
                self.job(i.job),
                self.slot(i.slot),
                f"tok{i.token}",
                f"inst{i.token}",
                30_000,
                i.max_attempts,
                overlap=i.overlap,
                deadline_ms=deadlines[i.deadline],
                create=i.create,
            )
            for i in self.items
        ]

    async def history(self, backend: SqlBackend) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for j in range(JOBS):
            for r in await backend.history(self.job(j), 100):
                rows.append(
                    (r.job, r.slot - self.base, r.attempt, r.instance_id, r.status, r.reason)
                )
        # Two records of one slot and attempt (a set-up claim, then a result written for
        # it) have no defined order between them: compare as a multiset.
        return sorted(rows, key=repr)


async def _both(factory: Any, batch_size: int) -> tuple[SqlBackend, SqlBackend]:
    tag = uuid.uuid4().hex[:6]
    batch = factory(f"bat{tag}_", batch_size)
    single = factory(f"one{tag}_")
    await batch.init()
    await single.init()
    return batch, single


async def _compare(factory: Any, states: list[str], items: list[Item], batch_size: int) -> None:
    batch, single = await _both(factory, batch_size)
    try:
        a, b = Scenario(states, items), Scenario(states, items)
        b.tag = a.tag
        await a.set_up(batch, await batch.runs.now_ms())
        await b.set_up(single, await single.runs.now_ms())
        await asyncio.sleep(0.03)  # the 1 ms leases of the set-up expire
        for _round in range(2):  # the second round is the batch retried with the same tokens
            got = [_answer(o) for o in await batch.runs.claim_many(a.claims())]
            want = [_answer(await single.runs.claim(c)) for c in b.claims()]
            assert got == want
        keys = [RunKey(c.job, c.slot, c.token) for c in a.claims()]
        keys.append(RunKey(a.job(0), a.slot(0), "nobody"))
        keys_b = [RunKey(c.job, c.slot, c.token) for c in b.claims()]
        keys_b.append(RunKey(b.job(0), b.slot(0), "nobody"))
        got_beats = await batch.runs.heartbeat_many(keys, 30_000)
        want_beats = [await single.runs.heartbeat(k.job, k.slot, k.token, 30_000) for k in keys_b]
        assert got_beats == want_beats
        finishes = [RunFinish(k.job, k.slot, k.token, "ok") for k in keys]
        finishes_b = [RunFinish(k.job, k.slot, k.token, "ok") for k in keys_b]
        for _round in range(2):
            got_done = await batch.runs.finish_many(finishes)
            want_done = [
                await single.runs.finish(f.job, f.slot, f.token, f.status) for f in finishes_b
            ]
            assert got_done == want_done
        writes = [
            ResultWrite(
                k.job,
                StoredResult(k.slot, k.token, "inst", "ok", k.slot, k.slot + 5, None),
                history_size=4,
            )
            for k in keys
        ]
        writes_b = [
            ResultWrite(
                k.job, StoredResult(k.slot, k.token, "inst", "ok", k.slot, k.slot + 5, None), 4
            )
            for k in keys_b
        ]
        await batch.save_results(writes)
        for w in writes_b:
            await single.save_result(w.job, w.result, w.history_size, w.history_ttl_ms)
        assert await a.history(batch) == await b.history(single)
    finally:
        await batch.close()
        await single.close()


@settings(
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    states=states_st,
    items=st.lists(items_st, min_size=1, max_size=14),
    batch_size=st.sampled_from((1, 2, 500)),
)
def test_batch_answers_what_the_items_answer_one_by_one(
    factory: Any, states: list[str], items: list[Item], batch_size: int
) -> None:
    asyncio.run(_compare(factory, states, items, batch_size))


async def test_plain_claim_many_equals_claim(factory: Any) -> None:
    batch, single = await _both(factory, 3)
    try:
        now = await batch.runs.now_ms()
        inputs = [
            ClaimInput(f"plain-{j}", now + s, f"t{t}", f"i{t}")
            for j, s, t in [(0, 0, 0), (0, 0, 1), (0, 1, 1), (1, 0, 2), (0, 0, 0), (1, 0, 2)]
        ]
        for _round in range(2):
            got = await batch.claim_many(inputs)
            want = [await single.claim(i) for i in inputs]
            assert got == want == [True, False, True, True, True, True]
        await batch.record_claims(inputs)  # a claim is its own record: nothing more is written
        assert [r.instance_id for r in await batch.history("plain-0", 10)] == ["i1", "i0"]
    finally:
        await batch.close()
        await single.close()


async def test_empty_batches(factory: Any) -> None:
    backend = factory(f"e{uuid.uuid4().hex[:6]}_")
    await backend.init()
    try:
        assert await backend.runs.claim_many([]) == []
        assert await backend.runs.heartbeat_many([], 1000) == []
        assert await backend.runs.finish_many([]) == []
        assert await backend.claim_many([]) == []
        await backend.save_results([])
    finally:
        await backend.close()


async def test_postgres_batches_are_one_statement_per_chunk(pg_dsn: str, prefix: str) -> None:
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        client = CountingClient(PsycopgClient(conn, pool=False, owned=False))
        backend = PostgresBackend(database=client, table_prefix=prefix)
        backend.batch_size = 500
        await backend.init()
        now = await backend.runs.now_ms()
        claims = [
            RunClaim(f"j{i % 50}", now + i, f"t{i}", "me", 30_000, overlap=True)
            for i in range(1200)
        ]
        client.statements.clear()
        client.transactions = 0
        outcomes = await backend.runs.claim_many(claims)
        assert all(o.won for o in outcomes)
        assert len(client.statements) == 3  # 500 + 500 + 200
        assert all(f"{prefix}claim_many_v3(" in s for s in client.statements)
        keys = [RunKey(c.job, c.slot, c.token) for c in claims]
        client.statements.clear()
        assert all(await backend.runs.heartbeat_many(keys, 30_000))
        assert all(
            await backend.runs.finish_many([RunFinish(k.job, k.slot, k.token, "ok") for k in keys])
        )
        writes = [
            ResultWrite(k.job, StoredResult(k.slot, k.token, "me", "ok", k.slot, k.slot + 1, None))
            for k in keys
        ]
        await backend.save_results(writes)
        assert len(client.statements) == 9, client.statements
        assert client.transactions == 0
        history = await backend.history("j0", 100)
        assert len(history) == 24
        assert {r.status for r in history} == {"ok"}
        await backend.close()
    finally:
        await conn.close()


async def test_postgres_batches_of_many_instances_do_not_deadlock(pg_dsn: str, prefix: str) -> None:
    """Four instances claim the same 300 slots in different orders at once: one winner each."""
    backends = [PostgresBackend(pg_dsn, table_prefix=prefix) for _ in range(4)]
    for b in backends:
        await b.init()
    try:
        now = await backends[0].runs.now_ms()
        slots = [(f"d{i % 60}", now + i) for i in range(300)]

        async def claim(n: int) -> list[ClaimOutcome]:
            order = slots if n % 2 == 0 else list(reversed(slots))
            claims = [
                RunClaim(job, slot, f"t{n}", f"i{n}", 30_000, overlap=True) for job, slot in order
            ]
            outcomes = await backends[n].runs.claim_many(claims)
            return outcomes if n % 2 == 0 else list(reversed(outcomes))

        answers = await asyncio.gather(*(claim(n) for n in range(4)))
        for per_slot in zip(*answers, strict=True):
            assert sorted(o.kind for o in per_slot) == ["running", "running", "running", "won"]
    finally:
        for b in backends:
            await b.close()


async def test_batch_retried_after_a_dropped_connection(pg_dsn: str, prefix: str) -> None:
    backend = PostgresBackend(pg_dsn, table_prefix=prefix, pool_size=2)
    await backend.init()
    admin = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        now = await backend.runs.now_ms()
        claims = [
            RunClaim(f"r{i % 7}", now + i, f"t{i}", "me", 30_000, overlap=True) for i in range(40)
        ]
        first = await backend.runs.claim_many(claims)
        assert all(o.won for o in first)
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        answers: list[ClaimOutcome] | None = None
        errors: list[BaseException] = []
        for _attempt in range(5):
            try:
                answers = await backend.runs.claim_many(claims)
                break
            except BackendUnavailableError as error:
                errors.append(error)
        assert all(backend.is_transient(e) for e in errors)
        assert answers is not None, errors
        assert [(o.kind, o.attempt, o.runner) for o in answers] == [("won", 1, "me")] * 40
    finally:
        await admin.close()
        await backend.close()
