"""``durability``: the setting, and the compare-and-set claim on a single server.

The compare-and-set claim (``durability="replicated"``) needs a stream of 3
replicas; on one server the tests drive it white-box, through a
:class:`~anarchon_nats._claims.Claims` with ``cas=True`` on a backend's store
(the failover rounds on a 3-node cluster are in
``test_nats_durability_cluster.py``, scenario tier).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
import pytest
from anarchon.errors import BackendUnavailableError, InvalidConfigError
from anarchon.types import ClaimInput
from anarchon_nats import NatsBackend
from anarchon_nats._claims import Claims
from anarchon_testservers.nats import start_server

T = TypeVar("T")


def _run(body: Callable[[], Awaitable[T]], timeout: float = 60) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), timeout)

    return asyncio.run(main())


def _token() -> str:
    return uuid.uuid4().hex


def _slot() -> int:
    return (time.time_ns() // 1_000_000 // 1000) * 1000 - 10_000


async def _subjects(url: str, stream: str, filter_subject: str) -> dict[str, int]:
    nc = await nats.connect(url)
    try:
        reply = await nc.request(
            f"$JS.API.STREAM.INFO.{stream}",
            json.dumps({"subjects_filter": filter_subject}).encode(),
            timeout=5,
        )
        body: dict[str, Any] = json.loads(reply.data)
        return dict(body["state"].get("subjects") or {})
    finally:
        await nc.close()


# The setting -------------------------------------------------------------------------


def test_durability_defaults_to_fast_and_takes_replicated() -> None:
    assert NatsBackend().durability == "fast"
    replicated = NatsBackend(durability="replicated")
    assert replicated.durability == "replicated"
    assert replicated.replicas == 3
    assert NatsBackend(durability="replicated", replicas=5).replicas == 5
    from_url = NatsBackend.from_url("nats://a:4222,b:4222?durability=replicated")
    assert (from_url.durability, from_url.replicas) == ("replicated", 3)
    assert "durability='replicated'" in repr(from_url)


@pytest.mark.parametrize("value", ["strong", "", "Replicated", 3, None])
def test_unknown_durability_is_refused_naming_it(value: Any) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        NatsBackend(durability=value)
    assert repr(value) in caught.value.message
    assert "'fast', 'replicated'" in caught.value.message


def test_unknown_durability_in_a_url_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="'sync'"):
        NatsBackend.from_url("nats://localhost:4222?durability=sync")


def test_replicated_refuses_fewer_than_three_replicas() -> None:
    with pytest.raises(InvalidConfigError, match="at least 3 replicas, got replicas=1"):
        NatsBackend(durability="replicated", replicas=1)
    with pytest.raises(InvalidConfigError, match="replicas=2"):
        NatsBackend.from_url("nats://localhost:4222?durability=replicated&replicas=2")


def test_replicated_is_refused_by_a_single_server(nats_url: str, stream: str, prefix: str) -> None:
    """One server cannot hold 3 replicas: the start fails with a coded error."""

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix, durability="replicated")
        try:
            with pytest.raises(InvalidConfigError, match="cannot create stream"):
                await backend.init()
        finally:
            await backend.close()

    _run(body)


def test_fast_logs_what_it_protects_against(
    nats_url: str, stream: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        await backend.init()
        await backend.close()

    with caplog.at_level(logging.INFO, logger="anarchon.nats"):
        _run(body)
    assert any(
        "durability 'fast'" in r.message and "a server crash can lose it" in r.message
        for r in caplog.records
    )


# The compare-and-set claim on one server ----------------------------------------------


def test_second_claimant_is_refused_also_after_the_duplicate_window(
    nats_url: str, stream: str, prefix: str
) -> None:
    """First writer wins; the slot stays taken after the window, unlike the ``fast`` claim."""
    window_ms = 200

    async def body() -> tuple[list[bool], list[bool]]:
        a = NatsBackend(nats_url, stream=stream, prefix=prefix, duplicate_window_ms=window_ms)
        b = NatsBackend(nats_url, stream=stream, prefix=prefix, duplicate_window_ms=window_ms)
        await a.init()
        await b.init()
        cas_a, cas_b = Claims(a._store, cas=True), Claims(b._store, cas=True)
        slot = _slot()
        first = ClaimInput("cas", slot, _token(), "a")
        answers = [
            (await cas_a.claim_many([first]))[0],
            (await cas_b.claim_many([ClaimInput("cas", slot, _token(), "b")]))[0],
        ]
        await asyncio.sleep(window_ms / 1000 * 3)  # the message id is forgotten
        answers += [
            (await cas_b.claim_many([ClaimInput("cas", slot, _token(), "b")]))[0],
            (await cas_a.claim_many([first]))[0],  # the winner's retry: still its own
        ]
        # The same wait with the fast claim: the forgotten id lets a second claim in.
        fast_slot = slot + 1000
        fast = [await a.claim(ClaimInput("fast", fast_slot, _token(), "a"))]
        await asyncio.sleep(window_ms / 1000 * 3)
        fast.append(await b.claim(ClaimInput("fast", fast_slot, _token(), "b")))
        history = await b.history("cas", 10)
        assert [(r.slot, r.instance_id) for r in history] == [(slot, "a")]
        await a.close()
        await b.close()
        return answers, fast

    answers, fast = _run(body)
    assert answers == [True, False, False, True]
    assert fast == [True, True]


def test_a_fast_claim_of_the_slot_stops_a_compare_and_set_claim(
    nats_url: str, stream: str, prefix: str
) -> None:
    """A fleet switching to ``replicated``: both claims carry the message id."""

    async def body() -> list[bool]:
        a = NatsBackend(nats_url, stream=stream, prefix=prefix)
        await a.init()
        cas = Claims(a._store, cas=True)
        slot = _slot()
        fast = ClaimInput("mixed", slot, _token(), "old")
        answers = [await a.claim(fast)]
        answers.append((await cas.claim_many([ClaimInput("mixed", slot, _token(), "new")]))[0])
        await a.close()
        return answers

    assert _run(body) == [True, False]


def test_slot_subjects_are_trimmed_to_the_per_subject_limit(
    nats_url: str, stream: str, prefix: str
) -> None:
    async def body() -> int:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix, history_size=10)
        await backend.init()
        cas = Claims(backend._store, cas=True)
        base = _slot() - 100_000
        inputs = [ClaimInput("trim", base + i * 1000, _token(), "a") for i in range(72)]
        for start in range(0, 72, 8):
            assert await cas.claim_many(inputs[start : start + 8]) == [True] * 8
        records = await backend.history("trim", 100)
        assert [r.slot for r in records] == [x.slot for x in reversed(inputs)][:10]
        await backend.close()
        return len(await _subjects(nats_url, stream, f"{prefix}trim.claims.*"))

    assert _run(body) == 10 + 72 - 64  # purged to 10 after the 64th win, then 8 more


def test_a_claim_whose_answer_is_lost_is_settled_by_reading_its_slot(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SIGSTOP the server past the request timeout: the answer is lost, the claim landed.

    While the server is stopped, the claim's publish and then the backend's
    read of the slot subject wait in its socket; it answers the read after
    storing the claim, so the claim is confirmed as won in the same call. A
    longer stop also loses the read: the call raises (transient) and logs a
    WARNING; the retry with the same token is true, and another instance's
    claim is false.
    """
    server, root = start_server()
    stream, prefix = f"L{uuid.uuid4().hex[:8].upper()}", f"l{uuid.uuid4().hex[:8]}."
    pid = server.process.pid if server.process is not None else 0

    async def stopped_for(seconds: float) -> None:
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)

    async def body() -> list[object]:
        backend = NatsBackend(server.url, stream=stream, prefix=prefix, request_timeout=1.0)
        other = NatsBackend(server.url, stream=stream, prefix=prefix)
        await backend.init()
        await other.init()
        cas, cas_other = Claims(backend._store, cas=True), Claims(other._store, cas=True)
        slot = _slot()
        first = ClaimInput("lost", slot, _token(), "a")
        pause = asyncio.create_task(stopped_for(1.5))
        await asyncio.sleep(0.05)
        outcomes: list[object] = [(await cas.claim_many([first]))[0]]
        await pause
        second = ClaimInput("lost", slot + 1000, _token(), "a")
        pause = asyncio.create_task(stopped_for(2.6))
        await asyncio.sleep(0.05)
        try:
            await cas.claim_many([second])
            outcomes.append("answered")
        except BackendUnavailableError:
            outcomes.append("unconfirmed")
        await pause
        outcomes.append((await cas.claim_many([second]))[0])
        outcomes.append(
            (await cas_other.claim_many([ClaimInput("lost", second.slot, _token(), "b")]))[0]
        )
        await backend.close()
        await other.close()
        return outcomes

    try:
        with caplog.at_level(logging.WARNING, logger="anarchon.nats"):
            outcomes = _run(body)
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)
    assert outcomes == [True, "unconfirmed", True, False]
    assert any("unconfirmed" in r.message for r in caplog.records)
