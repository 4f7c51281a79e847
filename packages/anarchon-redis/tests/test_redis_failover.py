"""Failover rounds on a primary, a replica and 3 Sentinels (scenario tier).

Each round is one real Sentinel failover: the primary is killed with
``kill -9`` and the Sentinels promote the replica. Within a round, instance A
claims :data:`SLOTS` fresh slots one claim call at a time (one iteration
each: its own claim script and, when replicated, its own ``WAIT``); after the
failover, instance B claims the same slots on the promoted replica, and A, still open, claims a
fresh slot through the new primary (it follows the fail-over). Between
rounds the killed node is restarted and the Sentinels make it a replica of
the new primary, so the next round fails over the other way.

- ``freeze``: the replica is stopped (``SIGSTOP``) and the primary drops its
  link (``CLIENT KILL TYPE replica``) while A claims, so nothing A wrote
  reaches it; it is resumed after the primary died. (A ``SIGSTOP`` alone lets
  the kernel buffer the stream, which the replica applies once resumed.) With
  ``durability="fast"`` every claim is lost and B wins every slot again: a
  double run per slot. With ``"replicated"`` every A claim is ``uncertain``
  (skipped by the scheduler) and B wins: each slot runs once.
- no freeze, ``"replicated"``: every A claim is confirmed by ``WAIT``, and B
  never wins a slot A won.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from anarchon.errors import BackendUnavailableError
from anarchon.types import RunClaim
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import (
    SentinelGroup,
    Server,
    start_replica,
    start_sentinels,
    start_server,
    wait_replicated,
)
from due_now import yearly_due_now

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""

pytestmark = pytest.mark.scenario

SLOTS = 100
"""Claims (iterations) per failover round."""
ROUNDS = 2
"""Failovers per test."""
LEASE_MS = 120_000


@dataclass
class Group:
    """The nodes and the Sentinels; ``primary`` and ``replica`` swap at each failover."""

    primary: Server
    replica: Server
    sentinels: SentinelGroup

    def fail_over(self, frozen: bool) -> float:
        """Kill the primary, resume a frozen replica, wait for the Sentinels; seconds it took."""
        began = time.monotonic()
        old = self.primary
        old.kill()
        if frozen:
            self.replica.thaw()
        self.sentinels.wait_primary(old.port, timeout=60)
        took = time.monotonic() - began
        self.primary, self.replica = self.replica, old
        old.start()  # empty (no persistence): the Sentinels turn it into a replica
        wait_replicated(self.primary, timeout=60)
        return took


@pytest.fixture
def group() -> Iterator[Group]:
    primary = start_server("redis")
    replica = start_replica(primary)
    sentinels = start_sentinels(primary, down_after_ms=1000, failover_timeout_ms=3000)
    found = Group(primary, replica, sentinels)
    try:
        yield found
    finally:
        found.replica.thaw()
        for server in (found.primary, found.replica, *sentinels.sentinels):
            server.stop()


def _claim(job: str, slot: int, instance: str) -> RunClaim:
    return RunClaim(job, slot, uuid.uuid4().hex, instance, LEASE_MS, max_attempts=1, overlap=True)


async def _round(group: Group, durability: str, frozen: bool) -> tuple[list[str], list[str]]:
    """One failover: A's outcome kinds and B's, slot by slot."""
    url = group.sentinels.url()
    prefix = f"f{uuid.uuid4().hex[:8]}:"
    # A frozen replica never answers, so each of A's claims waits the whole timeout: keep it
    # short there; elsewhere long enough that a loaded machine never makes WAIT time out.
    wait_ms = 50 if frozen else 2000
    a = RedisBackend(url, prefix=prefix, durability=durability, durability_timeout=wait_ms)
    await a.init()
    assert a.runs is not None
    job = "failover"
    if frozen:
        group.replica.freeze()
        # SIGSTOP alone does not cut the stream: the kernel keeps receiving what the
        # primary sends, and the replica applies it once resumed. The primary drops its
        # replica link too, so nothing A writes from here on reaches the replica.
        group.primary.command("CLIENT", "KILL", "TYPE", "replica")
    first = []
    for slot in range(SLOTS):
        first.append((await a.runs.claim(_claim(job, slot, "A"))).kind)
    group.fail_over(frozen)
    b = RedisBackend(url, prefix=prefix, durability=durability, durability_timeout=2000)
    await b.init()
    assert b.runs is not None
    second = [(await b.runs.claim(_claim(job, s, "B"))).kind for s in range(SLOTS)]
    await b.close()
    assert await _follows(a, job) == "won", "A, still open, follows the new primary"
    await a.close()
    return first, second


async def _follows(backend: RedisBackend, job: str) -> str:
    """A fresh claim through a backend opened before the fail-over (transient errors retried)."""
    assert backend.runs is not None
    deadline = time.monotonic() + 20
    while True:
        try:
            return (await backend.runs.claim(_claim(job, SLOTS + 1, "A"))).kind
        except BackendUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


def _runs(first: list[str], second: list[str]) -> list[int]:
    """How many times each slot runs: won claims (an uncertain claim is skipped)."""
    return [(x == "won") + (y == "won") for x, y in zip(first, second, strict=True)]


def test_fast_loses_claims_of_a_frozen_replica(group: Group) -> None:
    """Default durability: a failover to a replica that missed the claims runs each slot twice."""
    doubles = 0
    for _ in range(ROUNDS):
        first, second = asyncio.run(_round(group, "fast", frozen=True))
        assert first == ["won"] * SLOTS
        doubles += sum(1 for n in _runs(first, second) if n == 2)
    print(f"\nfast, frozen replica: {doubles} double runs in {ROUNDS * SLOTS} claims")
    assert doubles == ROUNDS * SLOTS


def test_replicated_claims_of_a_frozen_replica_are_uncertain(group: Group) -> None:
    """``replicated``: A's unconfirmed claims are uncertain, B wins: every slot runs once."""
    for _ in range(ROUNDS):
        first, second = asyncio.run(_round(group, "replicated", frozen=True))
        assert first == ["uncertain"] * SLOTS
        assert second == ["won"] * SLOTS
        assert _runs(first, second) == [1] * SLOTS


def test_replicated_confirmed_claims_survive_a_failover(group: Group) -> None:
    """``replicated`` without the freeze: after a confirmed WAIT, B never wins a slot A won."""
    for _ in range(ROUNDS):
        first, second = asyncio.run(_round(group, "replicated", frozen=False))
        assert first == ["won"] * SLOTS
        assert "won" not in second
        assert set(second) == {"running"}


def test_a_blocked_loop_through_a_sentinel_client_object_keeps_its_lease() -> None:
    """``RedisBackend(Sentinel(...).master_for(...))``: an async handler that blocks its loop
    for longer than the lease keeps the lease (the lease thread has a client of its own), so a
    backup on another loop never starts the slot beside it.
    """
    from anarchon import RunContext, Scheduler
    from redis.asyncio.sentinel import Sentinel

    primary = start_server("redis")
    replica = start_replica(primary)
    sentinels = start_sentinels(primary, wait_peers=False)
    job = f"blocked-{uuid.uuid4().hex[:8]}"
    prefix = f"b{uuid.uuid4().hex[:8]}:"
    starts: list[tuple[str, int, float]] = []
    a_started = threading.Event()
    done = threading.Event()

    async def handler(ctx: RunContext) -> None:
        starts.append((ctx.instance_id, ctx.attempt, time.monotonic()))
        if ctx.instance_id == "A":
            a_started.set()
            time.sleep(6)  # blocks A's event loop for two leases  # noqa: ASYNC251

    def schedule(backend: RedisBackend, instance: str) -> Scheduler:
        scheduler = Scheduler(
            backend, instance_id=instance, lease="3s", heartbeat="1s", stop_grace=0.2
        )
        scheduler.cron(job, DUE, handler, jitter=0, max_late="2h", max_attempts=3)
        return scheduler

    async def run_a() -> None:
        manager = Sentinel([("127.0.0.1", p) for p in sentinels.ports])  # type: ignore[no-untyped-call]
        client = manager.master_for(sentinels.service)
        a = schedule(RedisBackend(client, prefix=prefix), "A")
        await a.start()
        await asyncio.to_thread(done.wait, 60)
        await a.stop()
        await client.aclose()
        await manager.aclose()

    async def run_b() -> None:
        a_started.wait(30)
        b = schedule(RedisBackend(sentinels.url(), prefix=prefix), "B")
        await b.start()
        await asyncio.sleep(8)  # past A's 6 s block: a lost lease would have let B take over
        done.set()
        await b.stop()

    try:
        threads = [
            threading.Thread(target=lambda: asyncio.run(run_a())),
            threading.Thread(target=lambda: asyncio.run(run_b())),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert [(who, attempt) for who, attempt, _at in starts] == [("A", 1)]
    finally:
        for server in (primary, replica, *sentinels.sentinels):
            server.stop()
