"""``NatsBackend.claim_many`` and ``save_results`` against a real nats-server.

A batch must answer exactly what the same items answer one by one, in order:
won, lost to another instance, a retried winner (same token), repeated items
inside one batch, across chunk boundaries, and a batch retried whole after the
server died in the middle of it.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from anarchon.errors import BackendUnavailableError
from anarchon.types import ClaimInput, ResultWrite, StoredResult
from anarchon_nats import NatsBackend
from anarchon_nats.backend import BATCH_CHUNK
from anarchon_testservers.nats import start_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

T = TypeVar("T")


def _run(body: Callable[[], Awaitable[T]], timeout: float = 120) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), timeout)

    return asyncio.run(main())


def _base_slot() -> int:
    return (time.time_ns() // 1_000_000 // 1000) * 1000 - 60_000


def _backend(url: str, stream: str, prefix: str) -> NatsBackend:
    return NatsBackend(url, stream=stream, prefix=prefix)


# One item of a mixed batch: (job index, slot index, who). "who" picks the token:
# 0 and 1 are this instance's two tokens, 2 is another instance's.
Item = tuple[int, int, int]

items_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 2)), min_size=2, max_size=40
)
"""Few jobs and slots, so repeats of one (job, slot) inside a batch are common."""

prior_strategy = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 2)))
"""Claims made one by one before the batch: states won, lost and retried."""


async def _answers(
    backend: NatsBackend, base: int, tag: str, prior: list[Item], items: list[Item], batched: bool
) -> list[bool]:
    tokens = [f"{tag}-a", f"{tag}-b", f"{tag}-other"]

    def claim(item: Item) -> ClaimInput:
        job, slot, who = item
        return ClaimInput(f"job{job}", base + slot * 1000, tokens[who], "inst" if who < 2 else "x")

    for item in prior:
        await backend.claim(claim(item))
    if batched:
        return await backend.claim_many([claim(item) for item in items])
    return [await backend.claim(claim(item)) for item in items]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(prior=prior_strategy, items=items_strategy)
def test_a_batch_answers_what_the_items_answer_one_by_one(
    nats_url: str, prior: list[Item], items: list[Item]
) -> None:
    """The same prior claims and the same items on two fresh streams: one batched, one not."""

    async def body() -> None:
        tag = uuid.uuid4().hex[:8]
        base = _base_slot()
        one = _backend(nats_url, f"B1{tag.upper()}", f"b1{tag}.")
        many = _backend(nats_url, f"B2{tag.upper()}", f"b2{tag}.")
        try:
            expected = await _answers(one, base, tag, prior, items, batched=False)
            got = await _answers(many, base, tag, prior, items, batched=True)
        finally:
            await one.close()
            await many.close()
        assert got == expected

    _run(body)


def test_chunks_retries_and_losers(nats_url: str, stream: str, prefix: str) -> None:
    """2.5 chunks of claims: all won; the same batch again (a retry) all true; others all false."""

    async def body() -> None:
        a = _backend(nats_url, stream, prefix)
        b = _backend(nats_url, stream, prefix)
        base = _base_slot()
        count = BATCH_CHUNK * 2 + BATCH_CHUNK // 2
        mine = [ClaimInput(f"j{i % 7}", base + i, f"a{i}", "a") for i in range(count)]
        theirs = [ClaimInput(c.job, c.slot, f"b{i}", "b") for i, c in enumerate(mine)]
        try:
            assert await a.claim_many(mine) == [True] * count
            assert await a.claim_many(mine) == [True] * count
            assert await b.claim_many(theirs) == [False] * count
            # Single claims agree with the batch.
            assert await b.claim(theirs[-1]) is False
            assert await a.claim(mine[-1]) is True
            records = await a.history("j0", 1000)
            assert len(records) == len([c for c in mine if c.job == "j0"])
            assert {r.instance_id for r in records} == {"a"}
        finally:
            await a.close()
            await b.close()

    _run(body)


def test_empty_and_single_batches(nats_url: str, stream: str, prefix: str) -> None:
    async def body() -> None:
        backend = _backend(nats_url, stream, prefix)
        try:
            assert await backend.claim_many([]) == []
            one = ClaimInput("solo", _base_slot(), "t", "i")
            assert await backend.claim_many([one]) == [True]
            await backend.save_results([])
            await backend.record_claims([one])
        finally:
            await backend.close()

    _run(body)


def test_save_results_in_a_batch_show_in_history(nats_url: str, stream: str, prefix: str) -> None:
    """Results of 1,200 runs saved in one call; saving them again (a retry) changes nothing."""

    async def body() -> None:
        backend = _backend(nats_url, stream, prefix)
        base = _base_slot()
        claims = [ClaimInput(f"r{i % 3}", base + i, f"t{i}", "i") for i in range(1200)]
        statuses = ["ok", "error", "timeout"]
        writes = [
            ResultWrite(
                c.job,
                StoredResult(
                    slot=c.slot,
                    token=c.token,
                    instance_id="i",
                    status=statuses[i % 3 if c.job == "r1" else 0],
                    started_at=c.slot,
                    finished_at=c.slot + 5,
                    error="boom" if c.job == "r1" and i % 3 == 1 else None,
                ),
            )
            for i, c in enumerate(claims)
        ]
        try:
            assert all(await backend.claim_many(claims))
            await backend.save_results(writes)
            await backend.save_results(writes)  # retried whole: results merge by token
            records = await backend.history("r1", 1000)
        finally:
            await backend.close()
        assert len(records) == 400
        wanted = {w.result.slot: w.result.status for w in writes if w.job == "r1"}
        assert {r.slot: r.status for r in records} == wanted
        assert {r.error for r in records if r.status == "error"} == {"boom"}

    _run(body)


def test_a_batch_retried_after_the_server_died_answers_the_same(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The server is killed while a batch is in flight; the same backend retries the batch
    whole with the same tokens (as the scheduler does) until the restarted server answers:
    all true. Another instance's batch for the same slots: all false."""
    server, root = start_server(str(tmp_path_factory.mktemp("natsdie")))
    base = _base_slot()
    batch = [ClaimInput(f"d{i % 5}", base + i, f"tok{i}", "a") for i in range(20_000)]

    async def body() -> None:
        loop = asyncio.get_running_loop()
        backend = NatsBackend(server.url, stream="DIE", prefix="die.", request_timeout=2)
        other = NatsBackend(server.url, stream="DIE", prefix="die.")
        await backend.init()
        try:
            claiming = asyncio.ensure_future(backend.claim_many(batch))
            await asyncio.sleep(0.02)
            await loop.run_in_executor(None, server.kill)  # SIGKILL mid-batch
            with pytest.raises(BackendUnavailableError) as caught:
                await claiming
            assert backend.is_transient(caught.value)
            await loop.run_in_executor(None, server.start)
            deadline = time.monotonic() + 30
            while True:  # the client reconnects by itself; retry like the scheduler
                try:
                    mine = await backend.claim_many(batch)
                    break
                except BackendUnavailableError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            assert mine == [True] * len(batch)
            theirs = await other.claim_many([ClaimInput(c.job, c.slot, "x", "b") for c in batch])
            assert theirs == [False] * len(batch)
        finally:
            await backend.close()
            await other.close()

    try:
        _run(body)
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_batches_from_racing_instances_have_one_winner_per_slot(
    nats_url: str, stream: str, prefix: str
) -> None:
    """Four backends claim the same 3,000 slots in shuffled batches at once: one winner each."""

    async def body() -> None:
        backends = [_backend(nats_url, stream, prefix) for _ in range(4)]
        base = _base_slot()
        slots = [(f"race{i % 4}", base + i) for i in range(3000)]

        async def claimer(n: int) -> dict[tuple[str, int], bool]:
            order = slots[:]
            random.Random(n).shuffle(order)
            answers = await backends[n].claim_many(
                [ClaimInput(job, slot, f"{n}-{job}-{slot}", f"inst{n}") for job, slot in order]
            )
            return dict(zip(order, answers, strict=True))

        try:
            results = await asyncio.gather(*(claimer(n) for n in range(4)))
        finally:
            for backend in backends:
                await backend.close()
        for key in slots:
            assert sum(result[key] for result in results) == 1, key
        assert all(any(result.values()) for result in results)

    _run(body)
