"""``LeaseModelContract``: a lease store answers exactly like the reference model.

A hypothesis state machine drives :mod:`anarchon.backend.lease_model` and a real
lease store (``backend.runs``) with the same random operations: claims (new
and retried tokens, backups with ``create=False``, overlap on and off,
deadlines past and future, ``max_attempts`` 1 to 3), heartbeats, finishes,
releases, and time passing. Every answer must equal the model's.

Time passes through the store's clock: a suite whose store clock can be set
overrides :meth:`LeaseModelContract.advance_store_clock` (the memory backend
with a :class:`~anarchon.testing.FakeClock`); otherwise short real leases and
real sleeps are used. With a real clock the exact store time of a call is
only known to lie between two ``now_ms()`` readings taken around it, so the
model is evaluated at both ends and at every stored lease end between them
(and each stored lease is kept as the interval it may lie in); the store's
answer must equal the model's at one of those times.

    from anarchon.testing import LeaseModelContract

    class TestMyModel(LeaseModelContract):
        @pytest.fixture
        def backend(self):
            yield MyBackend.from_url("my://localhost")
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypeVar

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from anarchon.backend import Backend, RunStore
from anarchon.backend.lease_model import (
    Blocker,
    LeaseState,
    decide_claim,
    decide_finish,
    decide_heartbeat,
    decide_release,
)
from anarchon.testing.contracts._support import new_job, new_token
from anarchon.types import ClaimOutcome, RunClaim

__all__ = ["LeaseModelContract"]

_T = TypeVar("_T")
_SLOTS = 3
_INSTANCES = ("i1", "i2", "i3")
_HOUR_MS = 3_600_000


@dataclass(frozen=True)
class _Slot:
    """The model's state of one slot; the stored lease lies in ``[lo, hi]``."""

    state: LeaseState
    lo: int
    hi: int


_View = dict[int, LeaseState]


def _views(model: dict[int, _Slot], t0: int, t1: int) -> list[tuple[_View, int]]:
    """The extreme readings of the model: every lease at its low or high end, at each time that matters.

    The times are ``t0``, ``t1`` and every stored lease end between them: a
    lease that expires inside the call's interval makes the answer change
    there, and a lease the store then grants counts from that moment, not
    only from ``t1``.
    """
    times = sorted({t0, t1} | {x for s in model.values() for x in (s.lo, s.hi) if t0 < x < t1})
    out: list[tuple[_View, int]] = []
    for end in ("lo", "hi"):
        view = {
            slot: replace(s.state, lease_expires_at=s.lo if end == "lo" else s.hi)
            for slot, s in model.items()
        }
        out.extend((view, now) for now in times)
    return out


def _blocker(view: _View, slot: int, now: int) -> Blocker | None:
    best: tuple[int, LeaseState] | None = None
    for other, state in view.items():
        live = state.status == "running" and state.lease_expires_at > now
        if other < slot and live and (best is None or other > best[0]):
            best = (other, state)
    return None if best is None else Blocker(best[1].runner, best[1].lease_expires_at)


def _key(outcome: ClaimOutcome) -> tuple[Any, ...]:
    """What must match exactly: the kind, and the attempt and runner where the tree defines them."""
    if outcome.kind in ("won", "running"):
        return (outcome.kind, outcome.attempt, outcome.runner)
    if outcome.kind == "overlap":
        return (outcome.kind, outcome.runner)
    return (outcome.kind,)


class _LeaseMachine(RuleBasedStateMachine):
    """The machine; ``contract`` and ``loop`` are set on a subclass per test."""

    contract: ClassVar[LeaseModelContract]
    backend: ClassVar[Backend]
    loop: ClassVar[asyncio.AbstractEventLoop]

    def __init__(self) -> None:
        super().__init__()
        runs = self.backend.runs
        assert runs is not None, "LeaseModelContract needs a backend with `runs`"
        self.runs: RunStore = runs
        self.job = new_job("model")
        now = self._run(self.runs.now_ms())
        self.base = (now // 1000) * 1000
        self.model: dict[int, _Slot] = {}
        self.tokens: list[str] = []
        self.short = self.contract.short_lease_ms

    def _run(self, coro: Awaitable[_T]) -> _T:
        async def call() -> _T:
            return await asyncio.wait_for(coro, self.contract.call_timeout_s)

        return self.loop.run_until_complete(call())

    def _timed(self, coro: Awaitable[_T]) -> tuple[_T, int, int]:
        t0 = self._run(self.runs.now_ms())
        answer = self._run(coro)
        t1 = self._run(self.runs.now_ms())
        return answer, t0, t1

    def _slot(self, index: int) -> int:
        return self.base + index * 1000

    def _token(self, pick: int) -> str:
        if pick < len(self.tokens):
            return self.tokens[pick]
        token = new_token()
        self.tokens.append(token)
        return token

    def _store(self, slot: int, states: list[LeaseState]) -> None:
        leases = [s.lease_expires_at for s in states]
        self.model[slot] = _Slot(states[0], min(leases), max(leases))

    @rule(
        index=st.integers(0, _SLOTS - 1),
        pick=st.integers(0, 6),
        instance=st.sampled_from(_INSTANCES),
        short=st.booleans(),
        max_attempts=st.integers(1, 3),
        overlap=st.booleans(),
        create=st.booleans(),
        deadline=st.sampled_from(("none", "past", "future")),
    )
    def claim(
        self,
        index: int,
        pick: int,
        instance: str,
        short: bool,
        max_attempts: int,
        overlap: bool,
        create: bool,
        deadline: str,
    ) -> None:
        """One claim, compared with the claim tree."""
        slot = self._slot(index)
        token = self._token(pick)
        lease_ms = self.short if short else _HOUR_MS
        before = self._run(self.runs.now_ms())
        deadline_ms = {"none": None, "past": before - 1000, "future": before + _HOUR_MS}[deadline]
        request = RunClaim(
            job=self.job,
            slot=slot,
            token=token,
            instance_id=instance,
            lease_ms=lease_ms,
            max_attempts=max_attempts,
            overlap=overlap,
            deadline_ms=deadline_ms,
            create=create,
        )
        got, _t0, t1 = self._timed(self.runs.claim(request))
        expected = []
        for view, now in _views(self.model, before, t1):
            decision = decide_claim(view.get(slot), request, now, _blocker(view, slot, now))
            expected.append(decision)
        matching = [d for d in expected if _key(d.outcome) == _key(got)]
        assert matching, (
            f"claim {request} answered {got}; the model says one of "
            f"{sorted({repr(d.outcome) for d in expected})} (store time {before}..{t1})"
        )
        if got.kind in ("won", "running", "overlap"):
            leases = [d.outcome.lease_expires_at or 0 for d in matching]
            assert got.lease_expires_at is not None
            assert min(leases) <= got.lease_expires_at <= max(leases), (
                f"claim {request}: lease {got.lease_expires_at} not in {min(leases)}..{max(leases)}"
            )
        states = [d.state for d in matching if d.state is not None]
        if not states:
            return
        if got.kind in ("won", "running") and got.lease_expires_at is not None:
            exact = replace(states[0], lease_expires_at=got.lease_expires_at)
            states = [exact]
        self._store(slot, states)

    @rule(index=st.integers(0, _SLOTS - 1), pick=st.integers(0, 6), short=st.booleans())
    def heartbeat(self, index: int, pick: int, short: bool) -> None:
        """One heartbeat, compared with the model."""
        slot = self._slot(index)
        token = self._token(pick)
        lease_ms = self.short if short else _HOUR_MS
        got, t0, t1 = self._timed(self.runs.heartbeat(self.job, slot, token, lease_ms))
        decisions = [
            decide_heartbeat(view.get(slot), token, lease_ms, now)
            for view, now in _views(self.model, t0, t1)
        ]
        matching = [d for d in decisions if d.ok == got]
        assert matching, f"heartbeat of slot {index} by {token} answered {got}; the model differs"
        states = [d.state for d in matching if d.state is not None]
        if states:
            self._store(slot, states)

    @rule(index=st.integers(0, _SLOTS - 1), pick=st.integers(0, 6))
    def finish(self, index: int, pick: int) -> None:
        """One finish (status ``ok``), compared with the model."""
        slot = self._slot(index)
        token = self._token(pick)
        got, t0, t1 = self._timed(self.runs.finish(self.job, slot, token, "ok"))
        decisions = [
            decide_finish(view.get(slot), token, now) for view, now in _views(self.model, t0, t1)
        ]
        matching = [d for d in decisions if d.ok == got]
        assert matching, f"finish of slot {index} by {token} answered {got}; the model differs"
        states = [d.state for d in matching if d.state is not None]
        if states:
            self._store(slot, states)

    @rule(index=st.integers(0, _SLOTS - 1), pick=st.integers(0, 6))
    def release(self, index: int, pick: int) -> None:
        """One release (hand-over), compared with the model."""
        slot = self._slot(index)
        token = self._token(pick)
        got, t0, t1 = self._timed(self.runs.release(self.job, slot, token))
        decisions = [
            decide_release(view.get(slot), token, now) for view, now in _views(self.model, t0, t1)
        ]
        matching = [d for d in decisions if d.ok == got]
        assert matching, f"release of slot {index} by {token} answered {got}; the model differs"
        states = [d.state for d in matching if d.state is not None]
        if states:
            self._store(slot, states)

    @rule()
    def time_passes(self) -> None:
        """Let short leases expire: move the store clock, or sleep past them."""
        step = self.short + 20
        if not self.contract.advance_store_clock(self.backend, step):
            self.loop.run_until_complete(asyncio.sleep(step / 1000))

    @invariant()
    def store_time_moves_forward(self) -> None:
        """The store clock never runs backwards during a run (the model's times depend on it)."""
        now = self._run(self.runs.now_ms())
        assert now >= self.base


class LeaseModelContract:
    """The lease store answers every operation exactly like :mod:`anarchon.backend.lease_model`."""

    model_examples: ClassVar[int] = 15
    """Random programs per run (each run draws new ones; about 10 s on a real server)."""

    model_steps: ClassVar[int] = 25
    """Operations per program."""

    short_lease_ms: ClassVar[int] = 100
    """The short lease: expired after one ``time_passes`` step."""

    call_timeout_s: ClassVar[float] = 10.0
    """A store call taking longer than this fails the test."""

    def advance_store_clock(self, backend: Backend, ms: int) -> bool:
        """Move the store clock ``ms`` forward and return True, or return False (real sleeps)."""
        return False

    def test_lease_store_equals_model(self, backend: Backend) -> None:
        """Random claim/heartbeat/finish/release/time programs: the store answers as the model."""
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(backend.init())
            machine = type(
                "LeaseMachine",
                (_LeaseMachine,),
                {"contract": self, "backend": backend, "loop": loop},
            )
            run_state_machine_as_test(
                machine,
                settings=settings(
                    max_examples=self.model_examples,
                    stateful_step_count=self.model_steps,
                    deadline=None,
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                ),
            )
        finally:
            try:
                loop.run_until_complete(backend.close())
            finally:
                loop.close()
