"""A 3-node JetStream cluster: replicas, and exactly-once claims while the stream leader dies.

Three nats-server processes with ``-js`` route to each other on loopback
ports, each with its own store directory. The failover test kills the stream
leader (SIGKILL) in the middle of a claim race between connections to every
node; claims that fail during the election are retried with the same token,
as the scheduler does, and every slot must still have exactly one winner.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import nats
import pytest
from anarchon.backend import Backend
from anarchon.errors import BackendUnavailableError
from anarchon.testing import BackendContract
from anarchon.types import ClaimInput, JobLimits
from anarchon_nats import NatsBackend
from anarchon_testservers.nats import NatsCluster, start_cluster

T = TypeVar("T")


def _run(body: Callable[[], Awaitable[T]], timeout: float = 120) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), timeout)

    return asyncio.run(main())


async def _wait_ready(urls: list[str], timeout: float = 30.0) -> None:
    """Until every node answers ``$JS.API.INFO`` without error (a meta leader exists)."""
    deadline = time.monotonic() + timeout
    for url in urls:
        nc = await nats.connect(url)
        try:
            while True:
                try:
                    reply = await nc.request("$JS.API.INFO", b"", timeout=1)
                    if "error" not in json.loads(reply.data):
                        break
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"JetStream cluster not ready at {url}")
                await asyncio.sleep(0.1)
        finally:
            await nc.close()


def _cluster() -> Iterator[NatsCluster]:
    try:
        cluster = start_cluster(3)
    except RuntimeError as error:
        pytest.fail(f"cannot start a nats-server cluster: {error}", pytrace=False)
    try:
        _run(lambda: _wait_ready(cluster.urls))
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    """A 3-node cluster shared by the tests that kill nothing."""
    yield from _cluster()


@pytest.fixture
def own_cluster() -> Iterator[NatsCluster]:
    """A 3-node cluster for one test that kills a node."""
    yield from _cluster()


async def _stream_info(url: str, stream: str) -> dict[str, Any]:
    nc = await nats.connect(url)
    try:
        while True:
            reply = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
            body: dict[str, Any] = json.loads(reply.data)
            if "error" not in body and body.get("cluster", {}).get("leader"):
                return body
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


def _names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"C{tag.upper()}", f"c{tag}."


# Replicas ----------------------------------------------------------------------------


def test_new_stream_defaults_to_one_replica(cluster: NatsCluster) -> None:
    stream, prefix = _names()

    async def body() -> int:
        backend = NatsBackend(cluster.urls, stream=stream, prefix=prefix)
        await backend.init()
        await backend.close()
        return int((await _stream_info(cluster.urls[0], stream))["config"]["num_replicas"])

    assert _run(body) == 1


def test_replicas_change_an_existing_stream_only_when_given(cluster: NatsCluster) -> None:
    stream, prefix = _names()

    async def body() -> list[int]:
        seen = []
        for replicas in (None, None, 3, None, 1):
            backend = NatsBackend(cluster.urls, stream=stream, prefix=prefix, replicas=replicas)
            backend.check_job(JobLimits("a-job", 60_000, 2_000, 60_000, 1000))  # a runner
            await backend.init()
            await backend.close()
            info = await _stream_info(cluster.urls[0], stream)
            seen.append(int(info["config"]["num_replicas"]))
        return seen

    assert _run(body) == [1, 1, 3, 3, 1]


# Failover ----------------------------------------------------------------------------

CLAIMERS_PER_NODE = 2
ROUNDS = 240
KILL_AT_ROUND = 60


@pytest.mark.scenario
def test_exactly_once_while_the_stream_leader_is_killed(own_cluster: NatsCluster) -> None:
    cluster = own_cluster
    stream, prefix = _names()
    job = "failover"
    errors: Counter[str] = Counter()
    retried_wins = 0

    def connect(first: int) -> NatsBackend:
        """A backend connected to node ``first`` (the others are fallbacks)."""
        urls = [cluster.urls[first]] + [u for i, u in enumerate(cluster.urls) if i != first]
        return NatsBackend(
            urls,
            stream=stream,
            prefix=prefix,
            replicas=3,
            request_timeout=1.0,
            dont_randomize=True,
            reconnect_time_wait=0.2,
        )

    async def claim(backend: NatsBackend, request: ClaimInput, deadline: float) -> bool:
        """Claim like the scheduler: on an error, retry with the same token until it answers."""
        nonlocal retried_wins
        failed = False
        while True:
            try:
                won = await backend.claim(request)
                if failed and won:
                    retried_wins += 1
                return won
            except BackendUnavailableError as error:
                errors[type(error.__cause__).__name__] += 1
                failed = True
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def body() -> tuple[str, dict[int, list[ClaimInput]], list[Any]]:
        backends = [connect(i) for i in range(len(cluster.servers))]
        for backend in backends:
            await backend.init()
        info = await _stream_info(cluster.urls[0], stream)
        assert info["config"]["num_replicas"] == 3
        leader = str(info["cluster"]["leader"])
        victim = next(s for s in cluster.servers if s.name == leader)
        loop = asyncio.get_running_loop()

        base = (time.time_ns() // 1_000_000 // 1000) * 1000 - ROUNDS * 1000
        winners: dict[int, list[ClaimInput]] = {}
        kill: asyncio.Future[None] | None = None
        for r in range(ROUNDS):
            if r == KILL_AT_ROUND:
                kill = loop.run_in_executor(None, victim.kill)  # lands during the next rounds
            slot = base + r * 1000
            requests = [
                (backend, ClaimInput(job, slot, uuid.uuid4().hex, f"node{i}-claimer{c}"))
                for i, backend in enumerate(backends)
                for c in range(CLAIMERS_PER_NODE)
            ]
            deadline = time.monotonic() + 60
            answers = await asyncio.gather(*(claim(b, x, deadline) for b, x in requests))
            winners[slot] = [x for (_b, x), won in zip(requests, answers, strict=True) if won]
            await asyncio.sleep(0.01)
        assert kill is not None
        await kill
        reader = connect(next(i for i, s in enumerate(cluster.servers) if s.running))
        await reader.init()
        read_by = time.monotonic() + 60
        while True:  # right after the kill, a consumer may be placed on the dead node (2.9)
            try:
                records = await reader.history(job, ROUNDS * 2)
                break
            except BackendUnavailableError:
                if time.monotonic() > read_by:
                    raise
                await asyncio.sleep(0.5)
        for backend in (*backends, reader):
            await backend.close()
        return leader, winners, records

    leader, winners, records = _run(body, timeout=240)
    several = {slot: len(w) for slot, w in winners.items() if len(w) != 1}
    assert not several, f"slots without exactly one winner: {several}"
    assert sum(errors.values()) > 0, "the kill caused no failed claim: failover not exercised"
    per_slot = Counter(r.slot for r in records)
    assert sorted(per_slot) == sorted(winners), "history lacks a slot or has an extra one"
    assert set(per_slot.values()) == {1}
    assert all(r.instance_id == winners[r.slot][0].instance_id for r in records)
    print(
        f"killed stream leader {leader}; failed claim calls retried: {dict(errors)};"
        f" wins after a retry: {retried_wins}"
    )


# The contract on a replicated stream ------------------------------------------------


class TestNatsClusterContract(BackendContract):
    """The contract suite on an R3 stream, claimers spread over the three nodes."""

    supports_history_ttl = False

    @pytest.fixture(autouse=True)
    def _cluster(self, cluster: NatsCluster) -> None:
        self.urls = cluster.urls

    def _backend(self, first: int) -> NatsBackend:
        urls = self.urls[first:] + self.urls[:first]
        return NatsBackend(urls, stream="CLUSTERED", replicas=3, dont_randomize=True)

    @pytest.fixture
    def backend(self) -> Backend:
        return self._backend(0)

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [self._backend(i % len(self.urls)) for i in range(count)]
