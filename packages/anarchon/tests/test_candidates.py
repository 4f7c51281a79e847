"""Candidates: each job is claimed by its top-k members only (docs/scaling.md, "Candidates").

Several schedulers share one memory store, as instances share Redis. The
assertions are about who holds which job and that every slot runs once; the
deadlines only bound the waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

import pytest
from anarchon import MemoryBackend, RunContext, Scheduler
from anarchon._core import rendezvous_candidates
from anarchon.errors import InvalidConfigError
from anarchon.events import Event
from anarchon.fleet.roster import candidates_of, roster_k, roster_of
from anarchon.fleet.types import Member
from plain_backend import PlainBackend

JOBS = 24
PERIOD = "300ms"


async def _until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def _fleet(
    backend: MemoryBackend | PlainBackend,
    size: int,
    ran: list[tuple[str, int, str]],
    **options: object,
) -> list[Scheduler]:
    async def tick(ctx: RunContext) -> None:
        ran.append((ctx.job, ctx.slot, ctx.instance_id))

    schedulers = [
        Scheduler(backend, instance_id=f"i{n}", **options)  # type: ignore[arg-type]
        for n in range(size)
    ]
    for scheduler in schedulers:
        for j in range(JOBS):
            scheduler.every(f"job-{j}", PERIOD, tick)
    return schedulers


def _held(scheduler: Scheduler) -> set[str]:
    """The jobs in the scheduler's timetable: the ones it claims."""
    parts = scheduler._parts
    assert parts is not None
    timetable = parts.wakeups.timetable
    return {name for name in scheduler.jobs if name in timetable}


def _settled(schedulers: list[Scheduler], k: int) -> bool:
    """Every instance sees the same members, and holds exactly its candidate jobs."""
    names = sorted(s.instance_id for s in schedulers)
    for s in schedulers:
        parts = s._parts
        if parts is None or list(parts.candidates.group) != names:
            return False
        mine = {n for n in s.jobs if s.instance_id in rendezvous_candidates(names, n, k)}
        if _held(s) != mine:
            return False
    return True


def _no_slot_twice(ran: list[tuple[str, int, str]]) -> None:
    twice = [key for key, n in Counter((job, slot) for job, slot, _ in ran).items() if n > 1]
    assert not twice, twice[:5]


async def test_four_instances_each_claim_their_share_and_every_slot_runs_once() -> None:
    backend = MemoryBackend()
    ran: list[tuple[str, int, str]] = []
    fleet = _fleet(backend, 4, ran)
    for s in fleet:
        await s.start()
    try:
        await _until(lambda: _settled(fleet, 2))
        assert sum(len(_held(s)) for s in fleet) == JOBS * 2
        assert all(0 < len(_held(s)) < JOBS for s in fleet)
        seen = len(ran)
        await _until(lambda: len({job for job, _, _ in ran[seen:]}) == JOBS)
    finally:
        for s in fleet:
            await s.stop()
    _no_slot_twice(ran)
    by_instance = Counter(instance for _, _, instance in ran)
    assert len(by_instance) == 4, by_instance


async def test_a_stopping_instance_leaves_and_the_others_take_its_jobs() -> None:
    backend = MemoryBackend()
    ran: list[tuple[str, int, str]] = []
    fleet = _fleet(backend, 3, ran)
    left: list[str] = []
    for s in fleet:
        s.on("member_left", lambda event: left.append(f"{event.instance}:{event.member}"))
        await s.start()
    try:
        await _until(lambda: _settled(fleet, 2))
        await fleet[0].stop()
        rest = fleet[1:]
        await _until(lambda: _settled(rest, 2))
        assert all(_held(s) == set(s.jobs) for s in rest)  # two members, two candidates
        seen = len(ran)
        await _until(lambda: len({job for job, _, _ in ran[seen:]}) == JOBS)
        await _until(lambda: sorted(left) == ["i1:i0", "i2:i0"])
    finally:
        for s in fleet[1:]:
            await s.stop()
    _no_slot_twice(ran)


async def test_candidates_none_claims_every_job_on_every_instance() -> None:
    backend = MemoryBackend()
    ran: list[tuple[str, int, str]] = []
    fleet = _fleet(backend, 3, ran, candidates=None)
    for s in fleet:
        await s.start()
    try:
        assert all(_held(s) == set(s.jobs) for s in fleet)
        assert all(not s._parts.candidates.active for s in fleet if s._parts)
        assert await backend.members() == []  # no record is written
    finally:
        for s in fleet:
            await s.stop()


async def test_a_backend_without_membership_falls_back_to_every_instance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="anarchon")
    backend = PlainBackend()
    ran: list[tuple[str, int, str]] = []
    fleet = _fleet(backend, 3, ran)
    for s in fleet:
        await s.start()
    try:
        assert all(_held(s) == set(s.jobs) for s in fleet)
        await _until(lambda: len({job for job, _, _ in ran}) == JOBS)
    finally:
        for s in fleet:
            await s.stop()
    notes = [r.getMessage() for r in caplog.records if "every instance claims" in r.getMessage()]
    assert len(notes) == 3, notes  # once per instance
    _no_slot_twice(ran)


async def test_an_instance_with_other_jobs_ranks_apart_and_misses_nothing() -> None:
    """A rolling deploy: an instance whose jobs differ (here one more) is never ranked
    together with the others; it claims every job of its own, the others share theirs."""
    backend = MemoryBackend()
    ran: list[tuple[str, int, str]] = []
    fleet = _fleet(backend, 3, ran)

    async def extra(ctx: RunContext) -> None:
        ran.append((ctx.job, ctx.slot, ctx.instance_id))

    fleet[2].every("extra", PERIOD, extra)
    for s in fleet:
        await s.start()
    try:
        await _until(lambda: _settled(fleet[:2], 2))
        odd = fleet[2]
        assert odd._parts is not None
        assert odd._parts.candidates.group == ("i2",)
        assert _held(odd) == set(odd.jobs)
        seen = len(ran)
        await _until(lambda: len({job for job, _, _ in ran[seen:]}) == JOBS + 1)
    finally:
        for s in fleet:
            await s.stop()
    _no_slot_twice(ran)


async def test_a_member_joining_is_an_event_and_moves_jobs_to_it() -> None:
    backend = MemoryBackend()
    ran: list[tuple[str, int, str]] = []
    fleet = _fleet(backend, 3, ran, candidates=1)
    joined: list[Event] = []
    fleet[0].on("member_joined", joined.append)
    await fleet[0].start()
    await fleet[1].start()
    try:
        await _until(lambda: _settled(fleet[:2], 1))
        await fleet[2].start()
        await _until(lambda: _settled(fleet, 1))
        assert sum(len(_held(s)) for s in fleet) == JOBS
        await _until(lambda: [e.member for e in joined] == ["i1", "i2"])
        seen = len(ran)
        await _until(lambda: len({job for job, _, _ in ran[seen:]}) == JOBS)
    finally:
        for s in fleet:
            await s.stop()
    _no_slot_twice(ran)


@pytest.mark.parametrize("value", [0, -1, 1025, True, 2.0, "2"])
def test_candidates_must_be_none_or_a_count(value: object) -> None:
    with pytest.raises(InvalidConfigError, match="candidates must be None"):
        Scheduler("memory://", candidates=value)  # type: ignore[arg-type]


def test_candidate_stagger_is_a_duration() -> None:
    with pytest.raises(InvalidConfigError, match="candidate_stagger"):
        Scheduler("memory://", candidate_stagger="soon")


def test_a_roster_carries_its_count_and_ignores_order() -> None:
    one = roster_of(2, [("a", "f1"), ("b", "f2")])
    assert one == roster_of(2, [("b", "f2"), ("a", "f1")])
    assert one != roster_of(3, [("a", "f1"), ("b", "f2")])
    assert one != roster_of(2, [("a", "f1"), ("b", "f3")])
    assert roster_k(one) == 2
    assert [roster_k(r) for r in ("", "k0-x", "kx-1", "2-abc", "k1025-x")] == [None] * 5


def test_status_candidates_come_from_each_roster_group_declaring_the_job() -> None:
    old = roster_of(2, [("a", "f1")])
    new = roster_of(2, [("a", "f2")])
    members = [Member(f"o{n}", old, 0, 1) for n in range(4)] + [Member("n0", new, 0, 1)]
    shown = candidates_of("a", members, ["o1", "n0"])
    # groups in the order of their first member: "n0" sorts before "o0"
    assert shown == ["n0", *rendezvous_candidates([f"o{n}" for n in range(4)], "a", 2)]
    assert candidates_of("a", members, ["x"]) == []
