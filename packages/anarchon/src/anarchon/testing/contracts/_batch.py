"""The batch property of both contract suites: a batch answers what the same items answer one by one.

Each example builds the same mix of run states under two fresh job names on
one store. One job is then driven with the single-item calls, the other with
the batch member, item for item in the same order (repeated items and a
retried batch included), and the answers and the stores' resulting states are
compared. A mismatch fails with the scenario and both answer tables.

Used by :class:`~anarchon.testing.BackendContract` and
:class:`~anarchon.testing.LeaseContract`; every backend's test classes get it
by subclassing them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anarchon.backend import Backend, RunStore
from anarchon.testing.contracts._support import new_job, new_token, wall_ms
from anarchon.types import (
    ClaimInput,
    ClaimOutcome,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    StoredResult,
)

__all__ = [
    "CLAIM_KINDS",
    "LEASE_KINDS",
    "Scenario",
    "check_backend_batches",
    "check_lease_batches",
    "run_property",
    "scenarios",
]

T = TypeVar("T")

LEASE_KINDS = (
    "won",  # no state: a fresh claim wins attempt 1
    "running",  # another instance holds a live lease: a backup
    "recheck",  # the same, asked with create=False (a backup's re-check)
    "mine",  # this token already holds the lease: a retried claim wins again
    "done",  # the run finished
    "overlap",  # overlap=False and an older run of the job holds a live lease
    "late",  # no state and store time is past the deadline
    "none",  # create=False and no state
    "takeover",  # the lease expired with attempts left: attempt 2 wins
    "exhausted",  # the lease expired on the last attempt: done, interrupted
    "released",  # the runner released the lease (hand-over): attempt 2 wins
)
"""Run states the lease property mixes in one batch."""

CLAIM_KINDS = ("won", "lost", "mine")
"""States of a plain claim: fresh, won by another token, won by this token."""


@dataclass(frozen=True)
class Scenario:
    """One example: the state of each item, which items repeat, and whether the batch is retried."""

    kinds: tuple[str, ...]
    repeats: tuple[int, ...]
    """Indices of items sent a second time, appended to the batch (repeated tokens)."""
    retried: bool
    """The whole batch is sent twice (as after a dropped connection), with the same tokens."""
    saved: tuple[bool, ...]
    """Per item: finished (lease) or its result saved (claim-only) after the claims."""

    def describe(self) -> str:
        """The scenario in one line, for failure messages."""
        return (
            f"kinds={list(self.kinds)} repeats={list(self.repeats)} retried={self.retried}"
            f" saved={list(self.saved)}"
        )


def scenarios(kinds: Sequence[str], max_items: int = 12) -> st.SearchStrategy[Scenario]:
    """Scenarios over ``kinds``: 1..max_items items, some repeated, sometimes retried."""

    @st.composite
    def build(draw: st.DrawFn) -> Scenario:
        items = tuple(draw(st.lists(st.sampled_from(list(kinds)), min_size=1, max_size=max_items)))
        index = st.integers(min_value=0, max_value=len(items) - 1)
        repeats = tuple(draw(st.lists(index, max_size=3)))
        retried = draw(st.booleans())
        saved = tuple(draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items))))
        return Scenario(items, repeats, retried, saved)

    return build()


def run_property(
    backend: Backend,
    strategy: st.SearchStrategy[Scenario],
    check: Callable[[Backend, Scenario], Awaitable[None]],
    *,
    examples: int,
    timeout_s: float,
) -> None:
    """Run ``check`` for ``examples`` scenarios on one event loop: ``init()`` once, ``close()`` last."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(backend.init())

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(strategy)
        def example(scenario: Scenario) -> None:
            loop.run_until_complete(asyncio.wait_for(check(backend, scenario), timeout_s))

        example()
    finally:
        try:
            loop.run_until_complete(backend.close())
        finally:
            loop.close()


def _mismatch(
    what: str, scenario: Scenario, rows: Sequence[tuple[Any, Any, Any]], fields: str
) -> str:
    lines = [
        f"{what}: the batch member answered differently from the same items one by one",
        f"  scenario: {scenario.describe()}",
        f"  answers are {fields}",
        "  item | one by one | batch",
    ]
    lines += [f"  {label} | {single} | {batch}" for label, single, batch in rows]
    return "\n".join(lines)


def _compare(
    what: str,
    scenario: Scenario,
    labels: Sequence[str],
    single: list[Any],
    batch: list[Any],
    fields: str = "as the member returns them",
) -> None:
    assert len(batch) == len(single), (
        f"{what}: the batch member returned {len(batch)} answers for {len(single)} items"
        f" (scenario: {scenario.describe()})"
    )
    rows = list(zip(labels, single, batch, strict=True))
    if any(s != b for _label, s, b in rows):
        marked = [(f"{label}{' <-- differs' if s != b else ''}", s, b) for label, s, b in rows]
        raise AssertionError(_mismatch(what, scenario, marked, fields))


# The lease property ----------------------------------------------------


@dataclass
class _LeaseJob:
    """One of the two identical jobs of an example: its claims and the tokens the setup used."""

    job: str
    base: int
    claims: list[RunClaim]
    owners: list[str | None]
    """Per item: the token that holds (or held) the run after setup, if any."""


async def _build_lease_job(
    backend: Backend,
    runs: RunStore,
    scenario: Scenario,
    base: int,
    long_ms: int,
    short_ms: int,
) -> tuple[_LeaseJob, int]:
    """Prepare one job with the scenario's states; return it and the latest short lease expiry."""
    job = new_job("batch")
    await backend.prepare_job(job, 1000)
    claims: list[RunClaim] = []
    owners: list[str | None] = []
    expires = 0

    def claim(
        slot: int,
        instance: str,
        *,
        token: str | None = None,
        lease_ms: int = long_ms,
        max_attempts: int = 3,
        overlap: bool = True,
        deadline_ms: int | None = None,
        create: bool = True,
    ) -> RunClaim:
        return RunClaim(
            job=job,
            slot=slot,
            token=token or new_token(),
            instance_id=instance,
            lease_ms=lease_ms,
            max_attempts=max_attempts,
            overlap=overlap,
            deadline_ms=slot + 60_000 if deadline_ms is None else deadline_ms,
            create=create,
        )

    for i, kind in enumerate(scenario.kinds):
        slot = base + i * 1000
        me = f"batcher-{i}"
        owner: str | None = None
        if kind in ("running", "recheck", "done", "takeover", "exhausted", "released"):
            lease = short_ms if kind in ("takeover", "exhausted") else long_ms
            attempts = 1 if kind == "exhausted" else 3
            setup = claim(slot, f"holder-{i}", lease_ms=lease, max_attempts=attempts)
            won = await runs.claim(setup)
            assert won.kind == "won", f"setup: a fresh slot was not won ({kind}: {won})"
            owner = setup.token
            if kind == "done":
                assert await runs.finish(job, slot, setup.token, "ok"), "setup: finish failed"
            elif kind == "released":
                assert await runs.release(job, slot, setup.token), "setup: release failed"
            elif lease == short_ms:
                assert won.lease_expires_at is not None
                expires = max(expires, won.lease_expires_at)
        if kind == "mine":
            mine = claim(slot, me)
            assert (await runs.claim(mine)).kind == "won", "setup: a fresh slot was not won (mine)"
            claims.append(mine)
            owners.append(mine.token)
            continue
        if kind == "overlap":
            blocker = claim(slot - 500, f"holder-{i}")
            assert (await runs.claim(blocker)).kind == "won", "setup: the blocker was not won"
            owner = blocker.token
            claims.append(claim(slot, me, overlap=False))
        elif kind == "late":
            late_slot = slot - 3_600_000
            claims.append(claim(late_slot, me, deadline_ms=late_slot + 60_000))
        elif kind in ("none", "recheck"):
            claims.append(claim(slot, me, create=False))
        elif kind == "exhausted":
            claims.append(claim(slot, me, create=False, max_attempts=1))
        else:
            claims.append(claim(slot, me))
        owners.append(owner)
    return _LeaseJob(job, base, claims, owners), expires


_OUTCOME_FIELDS = "(kind, attempt, runner, lease_expires_at is None)"
_STATE_FIELDS = (
    "active: sorted (slot - base, attempt, runner, live);"
    " history: sorted (slot - base, attempt, instance_id, status, reason)"
)


def _outcome_row(outcome: ClaimOutcome) -> tuple[str, int, str | None, bool]:
    return (outcome.kind, outcome.attempt, outcome.runner, outcome.lease_expires_at is None)


async def _lease_state(backend: Backend, runs: RunStore, lj: _LeaseJob) -> list[Any]:
    active = sorted(
        (a.slot - lj.base, a.attempt, a.runner, a.live) for a in await runs.active(lj.job)
    )
    records = sorted(
        (r.slot - lj.base, r.attempt, r.instance_id, r.status, r.reason)
        for r in await backend.history(lj.job, 1000)
    )
    return [("active", active), ("history", records)]


async def check_lease_batches(
    backend: Backend, scenario: Scenario, long_ms: int, short_ms: int
) -> None:
    """The lease property for one scenario: claim_many, heartbeat_many, finish_many, release_many.

    A store that offers ``finish_and_save_many`` answers the finishes through
    it, compared with ``finish()`` followed by ``save_result()`` of the
    finished items one by one.
    """
    runs = backend.runs
    assert runs is not None, f"{type(backend).__name__} has no `runs`"
    now = await runs.now_ms()
    base = (now // 1000) * 1000 - 30_000
    single, expires_a = await _build_lease_job(backend, runs, scenario, base, long_ms, short_ms)
    batch, expires_b = await _build_lease_job(backend, runs, scenario, base, long_ms, short_ms)
    deadline = asyncio.get_running_loop().time() + 10
    while await runs.now_ms() <= max(expires_a, expires_b):
        assert asyncio.get_running_loop().time() < deadline, "the short leases never expired"
        await asyncio.sleep(0.005)

    def items(lj: _LeaseJob) -> list[RunClaim]:
        return lj.claims + [lj.claims[i] for i in scenario.repeats]

    labels = [f"{i}:{scenario.kinds[i]}" for i in range(len(scenario.kinds))]
    labels += [f"{i}:{scenario.kinds[i]} (repeated)" for i in scenario.repeats]
    passes = 2 if scenario.retried else 1
    for n in range(passes):
        what = "claim_many" if n == 0 else "claim_many retried with the same tokens"
        one_by_one = [_outcome_row(await runs.claim(c)) for c in items(single)]
        together = [_outcome_row(o) for o in await runs.claim_many(items(batch))]
        _compare(what, scenario, labels, one_by_one, together, _OUTCOME_FIELDS)
    _compare(
        "state after claim_many",
        scenario,
        ["active runs", "history"],
        await _lease_state(backend, runs, single),
        await _lease_state(backend, runs, batch),
        _STATE_FIELDS,
    )

    # Heartbeats: each item's own token, the setup owner's, a wrong one.
    def keys(lj: _LeaseJob) -> list[RunKey]:
        out = []
        for claim, owner in zip(lj.claims, lj.owners, strict=True):
            out.append(RunKey(lj.job, claim.slot, claim.token))
            out.append(RunKey(lj.job, claim.slot, owner or new_token()))
        return out

    key_labels = [
        f"{lab} {who}" for lab in labels[: len(scenario.kinds)] for who in ("own", "holder")
    ]
    beats = [await runs.heartbeat(k.job, k.slot, k.token, long_ms) for k in keys(single)]
    beats_together = list(await runs.heartbeat_many(keys(batch), long_ms))
    _compare("heartbeat_many", scenario, key_labels, beats, beats_together)

    # Finishes of the chosen items (own token, then the holder's), sent twice: repeat-safe.
    def finishes(lj: _LeaseJob) -> list[RunFinish]:
        out = []
        for claim, owner, save in zip(lj.claims, lj.owners, scenario.saved, strict=True):
            if save:
                out.append(RunFinish(lj.job, claim.slot, claim.token, "ok"))
                out.append(RunFinish(lj.job, claim.slot, owner or new_token(), "error", "boom"))
        return out

    fin_labels = [
        f"{labels[i]} {who}"
        for i, save in enumerate(scenario.saved)
        if save
        for who in ("own", "holder")
    ]

    def result_of(f: RunFinish) -> ResultWrite:
        return ResultWrite(
            f.job,
            StoredResult(f.slot, f.token, "finisher", f.status, f.slot, f.slot + 1, f.error, 1),
        )

    for n in range(2):
        singles, batched = finishes(single), finishes(batch)
        combined = await runs.finish_and_save_many(batched, [result_of(f) for f in batched])
        name = "finish_many" if combined is None else "finish_and_save_many"
        what = name if n == 0 else f"{name} retried with the same tokens"
        done = [await runs.finish(f.job, f.slot, f.token, f.status, f.error) for f in singles]
        if combined is None:
            done_together = list(await runs.finish_many(batched))
        else:
            done_together = list(combined)
            for f, ok in zip(singles, done, strict=True):
                if ok:
                    w = result_of(f)
                    await backend.save_result(w.job, w.result, w.history_size, w.history_ttl_ms)
        _compare(what, scenario, fin_labels, done, done_together)
    _compare(
        "state after the finishes",
        scenario,
        ["active runs", "history"],
        await _lease_state(backend, runs, single),
        await _lease_state(backend, runs, batch),
        _STATE_FIELDS,
    )

    # Releases (hand-overs) of every item, own token then the holder's, sent twice.
    for n in range(2):
        what = "release_many" if n == 0 else "release_many retried with the same tokens"
        released = [await runs.release(k.job, k.slot, k.token) for k in keys(single)]
        released_together = list(await runs.release_many(keys(batch)))
        _compare(what, scenario, key_labels, released, released_together)
    _compare(
        "state after the releases",
        scenario,
        ["active runs", "history"],
        await _lease_state(backend, runs, single),
        await _lease_state(backend, runs, batch),
        _STATE_FIELDS,
    )


# The claim-only property -----------------------------------------------


@dataclass
class _ClaimJob:
    job: str
    base: int
    inputs: list[ClaimInput]


async def _build_claim_job(backend: Backend, scenario: Scenario, base: int) -> _ClaimJob:
    job = new_job("batch")
    await backend.prepare_job(job, 1000)
    inputs = []
    for i, kind in enumerate(scenario.kinds):
        slot = base + i * 1000
        mine = ClaimInput(job, slot, new_token(), f"batcher-{i}")
        if kind == "lost":
            other = ClaimInput(job, slot, new_token(), f"holder-{i}")
            assert await backend.claim(other), "setup: a fresh slot was not won (lost)"
            await backend.record_claim(other)
        elif kind == "mine":
            assert await backend.claim(mine), "setup: a fresh slot was not won (mine)"
            await backend.record_claim(mine)
        inputs.append(mine)
    return _ClaimJob(job, base, inputs)


async def _claim_history(backend: Backend, cj: _ClaimJob) -> list[Any]:
    return sorted(
        (r.slot - cj.base, r.attempt, r.instance_id, r.status, r.manual, r.error)
        for r in await backend.history(cj.job, 1000)
    )


async def check_backend_batches(backend: Backend, scenario: Scenario) -> None:
    """The claim-only property for one scenario: claim_many, record_claims, save_results."""
    now = await backend.now_ms()
    if now is None:
        now = wall_ms()
    base = (now // 1000) * 1000 - 30_000
    single = await _build_claim_job(backend, scenario, base)
    batch = await _build_claim_job(backend, scenario, base)

    def items(cj: _ClaimJob) -> list[ClaimInput]:
        return cj.inputs + [cj.inputs[i] for i in scenario.repeats]

    labels = [f"{i}:{scenario.kinds[i]}" for i in range(len(scenario.kinds))]
    labels += [f"{i}:{scenario.kinds[i]} (repeated)" for i in scenario.repeats]
    won_single: list[ClaimInput] = []
    won_batch: list[ClaimInput] = []
    for n in range(2 if scenario.retried else 1):
        what = "claim_many" if n == 0 else "claim_many retried with the same tokens"
        one_by_one = [await backend.claim(x) for x in items(single)]
        together = list(await backend.claim_many(items(batch)))
        _compare(what, scenario, labels, one_by_one, together)
        won_single = [x for x, ok in zip(items(single), one_by_one, strict=True) if ok]
        won_batch = [x for x, ok in zip(items(batch), together, strict=True) if ok]
    for x in won_single:
        await backend.record_claim(x)
    await backend.record_claims(won_batch)
    _compare(
        "history after record_claims",
        scenario,
        ["history"],
        [await _claim_history(backend, single)],
        [await _claim_history(backend, batch)],
        "sorted (slot - base, attempt, instance_id, status, manual, error)",
    )

    def writes(cj: _ClaimJob) -> list[ResultWrite]:
        out = []
        for x, kind, save in zip(cj.inputs, scenario.kinds, scenario.saved, strict=True):
            if save and kind != "lost":
                result = StoredResult(
                    x.slot, x.token, x.instance_id, "error", x.slot + 5, x.slot + 9, "boom", 1
                )
                out.append(ResultWrite(cj.job, result, 1000))
        return out

    for w in writes(single):
        await backend.save_result(w.job, w.result, w.history_size, w.history_ttl_ms)
    await backend.save_results(writes(batch))
    _compare(
        "history after save_results",
        scenario,
        ["history"],
        [await _claim_history(backend, single)],
        [await _claim_history(backend, batch)],
        "sorted (slot - base, attempt, instance_id, status, manual, error)",
    )
