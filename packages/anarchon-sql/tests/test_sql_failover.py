"""Failover rounds on PostgreSQL with a standby (scenario tier; docs/backends/sql.md, "Durability").

Real servers on loopback: a primary from the provisioned binaries, a standby
made with ``pg_basebackup -R``, ``kill -9`` of the primary, ``pg_ctl
promote``. One round is one failover; each round takes ``SLOTS`` slots
through it (one job per slot), so ``ROUNDS * SLOTS`` iterations (100 by
default: ``ANARCHON_SQL_FAILOVER_ROUNDS`` and ``ANARCHON_SQL_FAILOVER_SLOTS``
change them).

- ``test_a_cancelled_claim_never_runs``: a synchronous standby whose
  walreceiver is frozen (SIGSTOP). Instance A's replicated claims wait for
  it and are cancelled by the client's ``call_timeout``; the primary dies and
  the standby is promoted; instance B claims the same slots there. A's claims
  are never answered ``won`` (uncertain, or an error), so each slot runs at
  most once; a claim confirmed before the freeze is never won by B; fast
  claims made during the freeze are won twice (the loss ``replicated`` avoids).
- ``test_a_lost_finish_heals``: an asynchronous standby, default durability;
  the link is cut (walreceiver frozen) 500 ms before the primary dies, after
  A finished its runs (and claimed more). On the promoted standby those runs
  show ``running`` (or nothing); A's re-sent finishes heal them, and B never
  runs a finished slot again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from anarchon.types import ClaimOutcome, ResultWrite, RunClaim, RunFinish, StoredResult
from anarchon_sql import PostgresBackend
from anarchon_testservers.postgres import PgServer, start_postgres, start_standby

pytestmark = pytest.mark.scenario

ROUNDS = int(os.environ.get("ANARCHON_SQL_FAILOVER_ROUNDS", "10"))
SLOTS = int(os.environ.get("ANARCHON_SQL_FAILOVER_SLOTS", "10"))
CALL_TIMEOUT = 1.0
LEASE_MS = 60_000


@contextmanager
def _pair(*, synchronous: bool) -> Iterator[tuple[PgServer, PgServer]]:
    primary = start_postgres()
    try:
        standby = start_standby(primary, synchronous=synchronous)
        try:
            yield primary, standby
        finally:
            standby.stop()
    finally:
        primary.stop()


def _fail_over(primary: PgServer, standby: PgServer, walreceiver: int) -> None:
    """kill -9 the primary, then the frozen walreceiver (so it never reads what the
    primary had sent), and promote the standby."""
    primary.kill9()
    os.kill(walreceiver, signal.SIGKILL)  # the standby restarts its processes (a crashed child)
    standby.promote()


async def _bounded(round_: Coroutine[Any, Any, dict[str, int]]) -> dict[str, int]:
    """A round, failed (not hung) when it takes over two minutes."""
    return await asyncio.wait_for(round_, 120)


def _claim(job: str, slot: int, token: str, instance: str) -> RunClaim:
    return RunClaim(job, slot, token, instance, LEASE_MS, deadline_ms=slot + 600_000)


async def _outcome(backend: PostgresBackend, claim: RunClaim) -> ClaimOutcome | None:
    """The claim's outcome, or None when it raised (a claim that failed never runs)."""
    try:
        return await backend.runs.claim(claim)
    except Exception:
        return None


async def _cancelled_claim_round(primary: PgServer, standby: PgServer) -> dict[str, int]:
    a = PostgresBackend(
        primary.dsn, durability="replicated", call_timeout=CALL_TIMEOUT, pool_size=SLOTS + 2
    )
    a_fast = PostgresBackend(primary.dsn, call_timeout=CALL_TIMEOUT, pool_size=SLOTS + 2)
    await a.init()
    await a_fast.init()
    now = await a.runs.now_ms()
    confirmed = await a.runs.claim(_claim("confirmed", now, "a-confirmed", "a"))
    assert confirmed.kind == "won"
    walreceiver = standby.freeze_walreceiver()
    started = time.monotonic()
    answers = await asyncio.gather(
        *(_outcome(a, _claim(f"job-{i}", now, f"a-{i}", "a")) for i in range(SLOTS))
    )
    waited = time.monotonic() - started
    fast = await asyncio.gather(
        *(_outcome(a_fast, _claim(f"fast-{i}", now, f"af-{i}", "a")) for i in range(SLOTS))
    )
    _fail_over(primary, standby, walreceiver)
    b = PostgresBackend(standby.dsn, call_timeout=5.0)
    try:
        b_answers = [
            await b.runs.claim(_claim(f"job-{i}", now, f"b-{i}", "b")) for i in range(SLOTS)
        ]
        b_fast = [
            await b.runs.claim(_claim(f"fast-{i}", now, f"bf-{i}", "b")) for i in range(SLOTS)
        ]
        b_confirmed = await b.runs.claim(_claim("confirmed", now, "b-confirmed", "b"))
    finally:
        await b.close()
        await asyncio.gather(a.close(), a_fast.close(), return_exceptions=True)
    a_won = sum(1 for x in answers if x is not None and x.won)
    runs = [
        int(x is not None and x.won) + int(y.won) for x, y in zip(answers, b_answers, strict=True)
    ]
    return {
        "a_won": a_won,
        "a_uncertain": sum(1 for x in answers if x is not None and x.kind == "uncertain"),
        "a_failed": sum(1 for x in answers if x is None),
        "b_won": sum(1 for y in b_answers if y.won),
        "twice": sum(1 for n in runs if n > 1),
        "b_won_confirmed": int(b_confirmed.won),
        "fast_twice": sum(
            1 for x, y in zip(fast, b_fast, strict=True) if x is not None and x.won and y.won
        ),
        "waited_ms": int(waited * 1000),
    }


def test_a_cancelled_claim_never_runs() -> None:
    totals: dict[str, int] = {}
    for _ in range(ROUNDS):
        with _pair(synchronous=True) as (primary, standby):
            figures = asyncio.run(_bounded(_cancelled_claim_round(primary, standby)))
        for key, value in figures.items():
            totals[key] = totals.get(key, 0) + value
    print(f"\ncancelled claims, {ROUNDS} failovers x {SLOTS} slots: {totals}")
    assert totals["a_won"] == 0, totals
    assert totals["twice"] == 0, totals
    assert totals["b_won_confirmed"] == 0, totals
    assert totals["a_uncertain"] + totals["a_failed"] == ROUNDS * SLOTS, totals
    assert totals["fast_twice"] > 0, "fast claims made during the freeze were not lost"


async def _lost_finish_round(primary: PgServer, standby: PgServer) -> dict[str, int]:
    a = PostgresBackend(primary.dsn, call_timeout=CALL_TIMEOUT)
    await a.init()
    now = await a.runs.now_ms()
    done = [_claim(f"job-{i}", now, f"a-{i}", "a") for i in range(SLOTS)]
    assert all(o.won for o in await a.runs.claim_many(done))
    target = primary.psql("SELECT pg_current_wal_insert_lsn()")  # the test server commits async
    give_up = time.monotonic() + 30
    while standby.psql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn") != "t":
        assert time.monotonic() < give_up, "the standby did not catch up"
        await asyncio.sleep(0.02)
    walreceiver = standby.freeze_walreceiver()
    # After the cut: finishes of the replicated claims, and runs claimed and finished.
    late = [_claim(f"late-{i}", now, f"al-{i}", "a") for i in range(SLOTS)]
    assert all(o.won for o in await a.runs.claim_many(late))
    finishes = [RunFinish(c.job, c.slot, c.token, "ok") for c in done + late]
    writes = [
        ResultWrite(c.job, StoredResult(c.slot, c.token, "a", "ok", now, now + 1), 100)
        for c in done + late
    ]
    assert all(await a.runs.finish_and_save_many(finishes, writes))
    await a.close()
    await asyncio.sleep(0.5)
    _fail_over(primary, standby, walreceiver)
    healed = PostgresBackend(standby.dsn, call_timeout=5.0)
    b = PostgresBackend(standby.dsn, call_timeout=5.0)
    try:
        stuck = 0
        for c in done:
            stuck += int(any(r.slot == c.slot for r in await healed.runs.active(c.job)))
        lost = 0
        for c in late:
            lost += int(await healed.runs.lease_state(c.job, c.slot, c.token) == "gone")
        # The re-send of the finishes (the core's part): idempotent by token.
        resent = await healed.runs.finish_and_save_many(finishes, writes)
        again = await b.runs.claim_many(
            [_claim(c.job, c.slot, f"b-{c.job}", "b") for c in done + late]
        )
        still_running = 0
        for c in done + late:
            still_running += len(await healed.runs.active(c.job))
            history = await healed.history(c.job, 10)
            still_running += sum(1 for r in history if r.status == "running")
    finally:
        await asyncio.gather(healed.close(), b.close())
    return {
        "stuck_before": stuck,
        "claims_lost": lost,
        "resent_true": sum(resent),
        "ran_again": sum(1 for o in again if o.won),
        "still_running": still_running,
    }


def test_a_lost_finish_heals() -> None:
    totals: dict[str, int] = {}
    for _ in range(ROUNDS):
        with _pair(synchronous=False) as (primary, standby):
            figures = asyncio.run(_bounded(_lost_finish_round(primary, standby)))
        for key, value in figures.items():
            totals[key] = totals.get(key, 0) + value
    print(f"\nlost finishes, {ROUNDS} failovers x {SLOTS} + {SLOTS} runs: {totals}")
    assert totals["stuck_before"] > 0, "no finish was lost: the cut did not hold"
    assert totals["resent_true"] == 2 * ROUNDS * SLOTS, totals
    assert totals["ran_again"] == 0, totals
    assert totals["still_running"] == 0, totals
