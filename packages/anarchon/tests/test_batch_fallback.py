"""A backend without batch members passes the contract suites through the per-item fallback,
and the batch property catches a batch member that answers differently from single calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from anarchon import Backend, ClaimOutcome, MemoryBackend, RunClaim
from anarchon.backend import RunStore
from anarchon.backend.batching import per_item
from anarchon.backend.memory import MemoryRunStore
from anarchon.testing import BackendContract, LeaseContract
from anarchon.testing.contracts._batch import (
    LEASE_KINDS,
    Scenario,
    check_lease_batches,
    run_property,
    scenarios,
)
from plain_backend import PlainBackend


def test_plain_backend_has_no_batch_members_of_its_own() -> None:
    """The wrapper really relies on the fallbacks (it overrides no batch member)."""
    backend = PlainBackend()
    assert backend.runs is not None
    for name in ("claim_many", "record_claims", "save_results"):
        assert getattr(type(backend), name) is getattr(Backend, name)
    for name in ("claim_many", "heartbeat_many", "finish_many"):
        assert getattr(type(backend.runs), name) is getattr(RunStore, name)


class TestPlainBackend(BackendContract, LeaseContract):
    """Both suites, batch property included, on the pre-batch interface."""

    @pytest.fixture
    def backend(self) -> Backend:
        return PlainBackend()

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [backend] * count


class TestPlainClaimOnlyBackend(BackendContract):
    """The claim-only suite on the pre-batch interface without leases."""

    @pytest.fixture
    def backend(self) -> Backend:
        return PlainBackend(leases=False)

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [backend] * count


class _SwappedRunStore(MemoryRunStore):
    """A broken batch: the first two answers of every claim batch swapped."""

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        answers = await super().claim_many(claims)
        if len(answers) >= 2:
            answers[0], answers[1] = answers[1], answers[0]
        return answers


def test_the_property_catches_a_wrong_batch() -> None:
    """A batch whose answers differ from single calls fails with the scenario and both tables."""
    backend = MemoryBackend()
    broken = _SwappedRunStore()
    backend._store = broken
    backend.runs = broken

    async def check(b: Backend, scenario: Scenario) -> None:
        await check_lease_batches(b, scenario, 60_000, 20)

    with pytest.raises(AssertionError) as failure:
        run_property(backend, scenarios(LEASE_KINDS), check, examples=60, timeout_s=30)
    message = str(failure.value)
    assert "claim_many: the batch member answered differently" in message
    assert "scenario: kinds=" in message
    assert "<-- differs" in message


async def test_fallback_runs_items_about_one_run_in_request_order() -> None:
    """Items with one key wait for each other (a repeated claim answers as a repeated call);
    other items still overlap, at most ``limit`` at once."""
    events: list[tuple[str, str]] = []
    in_flight = peak = 0

    async def call(item: tuple[str, str]) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        events.append(("start", item[1]))
        await asyncio.sleep(0.02 if item[1] == "a" else 0.001)
        events.append(("end", item[1]))
        in_flight -= 1
        return item[1]

    items = [("k1", "a"), ("k2", "b"), ("k1", "c"), ("k3", "d"), ("k1", "e")]
    answers = await per_item(call, items, limit=2, key=lambda item: item[0])
    assert answers == ["a", "b", "c", "d", "e"]
    assert events.index(("end", "a")) < events.index(("start", "c"))
    assert events.index(("end", "c")) < events.index(("start", "e"))
    assert events.index(("start", "b")) < events.index(("end", "a")), "other keys must not wait"
    assert peak <= 2
