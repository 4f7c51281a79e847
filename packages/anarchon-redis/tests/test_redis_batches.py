"""The native batch members on real servers: a batch answers what its items answer one by one.

Two stores (two prefixes on one server) get the same set-up; then the same
items are sent one by one to the first and as one batch to the second, and
the answers and the stored history are compared. Covered: won, running,
done, overlap, late, none and attempts exhausted, a token repeated in one
batch, batches larger than a chunk, a Redis Cluster (calls grouped per job),
and ``NOSCRIPT`` after ``SCRIPT FLUSH``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio
from anarchon.types import (
    ClaimInput,
    ClaimOutcome,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    StoredResult,
)
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis._batch import CHUNK
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Cluster, Server

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def _backend(server: Server, prefix: str, strategy: str = "lease") -> RedisBackendBase:
    cls = RedisBackend if server.kind != "valkey" else ValkeyBackend
    return cls(server.url, strategy=strategy, prefix=prefix)


async def _pair(
    make: Callable[[str], RedisBackendBase],
    body: Callable[[RedisBackendBase, RedisBackendBase], Awaitable[T]],
) -> T:
    one, batch = make(f"o{uuid.uuid4().hex[:8]}:"), make(f"b{uuid.uuid4().hex[:8]}:")
    await one.init()
    await batch.init()
    try:
        return await body(one, batch)
    finally:
        await one.close()
        await batch.close()


def _shape(outcome: ClaimOutcome) -> tuple[Any, ...]:
    """What must be equal between two stores (lease expiries differ by the clock)."""
    return (outcome.kind, outcome.attempt, outcome.runner, outcome.lease_expires_at is None)


def _history_shape(records: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.slot, r.instance_id, r.status, r.attempt, r.reason) for r in records]


async def _mixed_claims(one: RedisBackendBase, batch: RedisBackendBase) -> None:
    """Every branch of the claim tree, one by one on ``one`` and as one batch on ``batch``."""
    now = await one.now_ms()
    base = now - now % 1000 - 60_000
    long, short = 600_000, 1
    setup = [
        RunClaim("a", base, "held", "w1", long, 3, True),  # running, live lease
        RunClaim("a", base + 1000, "fin", "w1", long, 3, True),  # done (finished below)
        RunClaim("b", base, "dead", "w1", short, 2, True),  # expired: taken over (attempt 2)
        RunClaim("c", base, "dead1", "w1", short, 1, True),  # expired, last attempt: exhausted
        RunClaim("d", base, "old", "w1", long, 3, True),  # blocks a later slot (overlap)
    ]
    for backend in (one, batch):
        runs = backend.runs
        assert runs is not None
        for claim in setup:
            assert (await runs.claim(claim)).won
        assert await runs.finish("a", base + 1000, "fin", "ok")
    await asyncio.sleep(0.02)  # the 1 ms leases expire
    items = [
        RunClaim("a", base, "other", "w2", long, 3, True),  # running
        RunClaim("a", base, "held", "w1", long, 3, True),  # won again: the same token
        RunClaim("a", base + 1000, "late-comer", "w2", long, 3, True),  # done
        RunClaim("b", base, "next", "w2", long, 2, True),  # won, attempt 2
        RunClaim("c", base, "next", "w2", long, 1, True),  # done (attempts exhausted)
        RunClaim("d", base + 1000, "blocked", "w2", long, 3, False),  # overlap
        RunClaim("e", base, "too-late", "w2", long, 3, True, deadline_ms=now - 1),  # late
        RunClaim("e", base + 1000, "nothing", "w2", long, 3, True, create=False),  # none
        RunClaim("f", base, "new", "w2", long, 3, True),  # won
        RunClaim("f", base, "new", "w2", long, 3, True),  # the same token again: won
        RunClaim("f", base, "rival", "w3", long, 3, True),  # running (the first is live)
    ]
    runs_one, runs_batch = one.runs, batch.runs
    assert runs_one is not None
    assert runs_batch is not None
    singles = [await runs_one.claim(item) for item in items]
    batched = await runs_batch.claim_many(items)
    kinds = [o.kind for o in singles]
    assert kinds == [
        "running",
        "won",
        "done",
        "won",
        "done",
        "overlap",
        "late",
        "none",
        "won",
        "won",
        "running",
    ]
    assert [_shape(o) for o in batched] == [_shape(o) for o in singles]
    # A batch retried whole (same tokens) answers the same again: every item is repeat-safe.
    again_one = [await runs_one.claim(item) for item in items]
    again_batch = await runs_batch.claim_many(items)
    assert [_shape(o) for o in again_batch] == [_shape(o) for o in again_one]
    for job in "abcdef":
        assert _history_shape(await batch.history(job, 50)) == _history_shape(
            await one.history(job, 50)
        )


def test_a_lease_batch_answers_what_its_items_answer_one_by_one(server: Server) -> None:
    run(_pair(lambda p: _backend(server, p), _mixed_claims))


def test_a_lease_batch_on_a_cluster_answers_the_same(redis_cluster: Cluster) -> None:
    """Keys of many jobs live on different nodes: the calls go per job, pipelined."""

    def make(prefix: str) -> RedisBackendBase:
        client = redis.asyncio.RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0])
        return RedisBackend(client, prefix=prefix)

    async def body(one: RedisBackendBase, batch: RedisBackendBase) -> None:
        try:
            await _mixed_claims(one, batch)
        finally:
            await one.client.aclose()
            await batch.client.aclose()

    run(_pair(make, body))


async def _heartbeats_and_finishes(one: RedisBackendBase, batch: RedisBackendBase) -> None:
    now = await one.now_ms()
    base = now - now % 1000
    for backend in (one, batch):
        runs = backend.runs
        assert runs is not None
        for job in ("h1", "h2"):
            assert (await runs.claim(RunClaim(job, base, f"{job}-t", "w", 60_000, 3, True))).won
        assert await runs.finish("h2", base, "h2-t", "ok")
    keys = [
        RunKey("h1", base, "h1-t"),  # live: extended
        RunKey("h1", base, "wrong"),  # not the token
        RunKey("h2", base, "h2-t"),  # finished: not extended
        RunKey("h3", base, "none"),  # no such run
    ]
    runs_one, runs_batch = one.runs, batch.runs
    assert runs_one is not None
    assert runs_batch is not None
    singles = [await runs_one.heartbeat(k.job, k.slot, k.token, 90_000) for k in keys]
    assert singles == [True, False, False, False]
    assert await runs_batch.heartbeat_many(keys, 90_000) == singles
    finishes = [
        RunFinish("h1", base, "wrong", "ok"),
        RunFinish("h1", base, "h1-t", "ok"),
        RunFinish("h1", base, "h1-t", "ok"),  # a retried finish: True again
        RunFinish("h2", base, "h2-t", "error", "boom"),  # finished already by this token
        RunFinish("h3", base, "none", "ok"),  # no state: a finished one is written for it
    ]
    singles = [await runs_one.finish(f.job, f.slot, f.token, f.status, f.error) for f in finishes]
    assert singles == [False, True, True, True, True]
    assert await runs_batch.finish_many(finishes) == singles
    assert await runs_batch.active("h1") == [] == await runs_one.active("h1")


def test_heartbeat_and_finish_batches_answer_per_run(server: Server) -> None:
    run(_pair(lambda p: _backend(server, p), _heartbeats_and_finishes))


def test_batches_larger_than_a_chunk_and_results_in_one_call(redis_server: Server) -> None:
    """2.5 chunks of claims over 7 jobs: every answer in request order, every result stored."""
    count = CHUNK * 2 + CHUNK // 2

    async def body(b: RedisBackendBase) -> None:
        runs = b.runs
        assert runs is not None
        now = await b.now_ms()
        base = now - now % 1000 - count * 1000
        claims = [
            RunClaim(f"j{i % 7}", base + (i // 7) * 1000, f"t{i}", "w", 60_000, 3, True)
            for i in range(count)
        ]
        outcomes = await runs.claim_many(claims)
        assert all(o.won and o.attempt == 1 for o in outcomes)
        rivals = [RunClaim(c.job, c.slot, f"r-{c.token}", "x", 60_000, 3, True) for c in claims]
        assert {o.kind for o in await runs.claim_many(rivals)} == {"running"}
        assert all(
            await runs.finish_many([RunFinish(c.job, c.slot, c.token, "ok") for c in claims])
        )
        await b.save_results(
            [
                ResultWrite(c.job, StoredResult(c.slot, c.token, "w", "ok", c.slot, c.slot), 5000)
                for c in claims
            ]
        )
        for j in range(7):
            history = await b.history(f"j{j}", 5000)
            wanted = sorted(c.slot for c in claims if c.job == f"j{j}")
            assert sorted(r.slot for r in history) == wanted
            assert {r.status for r in history} == {"ok"}

    backend = _backend(redis_server, f"t{uuid.uuid4().hex[:8]}:")

    async def main() -> None:
        await backend.init()
        try:
            await body(backend)
        finally:
            await backend.close()

    run(main())


@pytest.mark.parametrize("strategy", ["lease", "stream-id", "script"])
def test_batches_survive_script_flush(server: Server, strategy: str) -> None:
    """After ``SCRIPT FLUSH`` (or a restart) the batch calls load their scripts again."""
    admin = redis.Redis(host="127.0.0.1", port=server.port)

    async def main() -> None:
        b = _backend(server, f"t{uuid.uuid4().hex[:8]}:", strategy)
        await b.init()
        try:
            now = await b.now_ms()
            slot = now - now % 1000
            inputs = [ClaimInput(f"job{i}", slot, f"t{i}", "w", 10) for i in range(3)]
            admin.script_flush()
            assert await b.claim_many(inputs) == [True, True, True]
            admin.script_flush()
            writes = [
                ResultWrite(i.job, StoredResult(slot, i.token, "w", "ok", slot, slot), 10)
                for i in inputs
            ]
            await b.save_results(writes)
            if b.runs is not None:
                admin.script_flush()
                keys = [RunKey(i.job, slot, i.token) for i in inputs]
                assert await b.runs.heartbeat_many(keys, 1000) == [False, False, False]
                admin.script_flush()
                finishes = [RunFinish(i.job, slot, i.token, "ok") for i in inputs]
                assert await b.runs.finish_many(finishes) == [True, True, True]
            for i in inputs:
                assert [(r.slot, r.status) for r in await b.history(i.job, 10)] == [(slot, "ok")]
        finally:
            await b.close()

    run(main())


async def _claim_only(one: RedisBackendBase, batch: RedisBackendBase) -> None:
    now = await one.now_ms()
    base = now - now % 1000 - 10_000
    setup = [ClaimInput("a", base + 5000, "first", "w1", 10)]
    for backend in (one, batch):
        for item in setup:
            assert await backend.claim(item)
    items = [
        ClaimInput("a", base + 5000, "rival", "w2", 10),  # taken
        ClaimInput("a", base + 5000, "first", "w1", 10),  # a retry of the winner
        ClaimInput("a", base + 6000, "next", "w2", 10),  # new
        ClaimInput("a", base + 6000, "next", "w2", 10),  # repeated in the batch
        ClaimInput("a", base + 6000, "other", "w3", 10),  # taken in the same batch
        ClaimInput("a", base + 1000, "older", "w3", 10),  # stream-id: older than the top
        ClaimInput("b", base, "b1", "w3", 10),
    ]
    singles = [await one.claim(item) for item in items]
    assert singles[:5] == [False, True, True, True, False]
    assert await batch.claim_many(items) == singles
    assert await batch.claim_many(items) == [await one.claim(item) for item in items]
    writes = [
        ResultWrite(i.job, StoredResult(i.slot, i.token, i.instance_id, "ok", i.slot, i.slot), 10)
        for i, won in zip(items, singles, strict=True)
        if won
    ]
    for w in writes:
        await one.save_result(w.job, w.result, w.history_size, w.history_ttl_ms)
    await batch.save_results(writes)
    for job in ("a", "b"):
        assert _history_shape(await batch.history(job, 50)) == _history_shape(
            await one.history(job, 50)
        )


@pytest.mark.parametrize("strategy", ["stream-id", "script"])
def test_claim_only_batches_answer_what_their_items_answer(server: Server, strategy: str) -> None:
    run(_pair(lambda p: _backend(server, p, strategy), _claim_only))


def test_idmp_batches_answer_what_their_items_answer(redis86_server: Server) -> None:
    run(_pair(lambda p: _backend(redis86_server, p, "idmp"), _claim_only))
