"""Which jobs this instance claims: its rank among the job's candidates (docs/scaling.md, "Candidates").

Every ``refresh_ms`` an instance refreshes its membership record
(``Backend.refresh_member``) and reads the live members back in the same
call. The members whose roster equals this instance's (same jobs with the
same fingerprints, same ``candidates``) form its group; for each job the
group's members are ranked by rendezvous hashing of (instance, job) in the
slot engine, and the first ``k`` are the job's candidates. A candidate of
rank ``r`` keeps the job in its timetable, due ``r * stagger`` after the
slot; any other instance drops it. When the group changes, a job that
becomes this instance's is added with a look-back of its ``max_late``, so
a slot its old candidates missed (they all died) is claimed late rather
than lost.

Safety does not depend on the views agreeing: the store's claim of each
(job, slot) still elects one run; views that differ during churn only add
claims. A backend without membership (``UnsupportedError``) falls back to
every instance claiming every job, logged once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from anarchon import _core
from anarchon._scheduler.store_retry import StorePolicy
from anarchon.backend.base import Backend
from anarchon.errors import UnsupportedError
from anarchon.events import EventBus
from anarchon.fleet.roster import roster_of
from anarchon.fleet.types import Member
from anarchon.jobs import Job

__all__ = [
    "DEFAULT_CANDIDATES",
    "DEFAULT_STAGGER_MS",
    "MAX_CANDIDATES",
    "MEMBER_REFRESH_MS",
    "MEMBER_TTL_MS",
    "Candidates",
]

DEFAULT_CANDIDATES = 2
"""Instances that claim each job-slot, unless ``Scheduler(candidates=...)`` says otherwise."""
MAX_CANDIDATES = 1024
DEFAULT_STAGGER_MS = 250
"""How much later rank ``r + 1`` claims than rank ``r`` (at most ``max_late / (2 k)``)."""
MEMBER_REFRESH_MS = 1_000
"""How often an instance refreshes its membership record."""
MEMBER_TTL_MS = 4_000
"""How long a record lives without a refresh: three missed refreshes and one more second."""

RankChange = Callable[[Job, "int | None", "int | None"], None]
"""``on_change(job, old_rank, new_rank)``: ``None`` means not a candidate."""


class Candidates:
    """This instance's view of the live members and its rank for each job."""

    def __init__(
        self,
        *,
        backend: Backend,
        instance_id: str,
        jobs: dict[str, Job],
        k: int | None,
        stagger_ms: int,
        policy: StorePolicy,
        fingerprint_of: Callable[[Job], str],
        events: EventBus,
        log: logging.Logger,
        refresh_ms: int = MEMBER_REFRESH_MS,
        ttl_ms: int = MEMBER_TTL_MS,
    ) -> None:
        self.backend = backend
        self.instance_id = instance_id
        self.jobs = jobs
        self.k = k
        self.stagger_ms = stagger_ms
        self.policy = policy
        self.fingerprint_of = fingerprint_of
        self.events = events
        self.log = log
        self.refresh_ms = refresh_ms
        self.ttl_ms = ttl_ms
        self.on_change: RankChange | None = None
        """Called for each job whose rank changed (the wake-up loop moves it in its timetable)."""
        self.active = False
        """True while ranks apply: ``k`` is set and the backend keeps membership records."""
        self.supported = k is not None
        self.members: list[Member] = []
        """The live members of the last refresh (every roster)."""
        self.group: tuple[str, ...] = ()
        """The members with this instance's roster, sorted: the ones ranked."""
        self._roster: str | None = None
        self._dirty = True
        self._ranks: dict[str, int | None] = {}
        self._left = False

    # Ranks ----------------------------------------------------------------

    def rank_of(self, job: Job) -> int | None:
        """This instance's rank among ``job``'s candidates, or None if it is not one."""
        if not self.active or self.k is None:
            return 0
        name = job.name
        try:
            return self._ranks[name]
        except KeyError:
            rank = _core.rendezvous_ranks(list(self.group), self.instance_id, [name], self.k)[0]
            self._ranks[name] = rank
            return rank

    def delay_ms(self, job: Job, rank: int) -> int:
        """How long after its slot rank ``rank`` claims ``job``."""
        if rank <= 0 or self.k is None:
            return 0
        step = min(self.stagger_ms, job.max_late_ms // (2 * self.k))
        return rank * max(step, 0)

    def candidates_of(self, name: str) -> list[str]:
        """The candidates of job ``name`` in this instance's group, in rank order."""
        if not self.active or self.k is None:
            return []
        return _core.rendezvous_candidates(list(self.group), name, self.k)

    def jobs_changed(self) -> None:
        """A job was added or removed: the roster is recomputed at the next refresh."""
        self._dirty = True

    # Membership -----------------------------------------------------------

    def _roster_now(self) -> str:
        if self._dirty or self._roster is None:
            assert self.k is not None
            self._roster = roster_of(
                self.k,
                ((job.name, self.fingerprint_of(job)) for job in self.jobs.values() if job.enabled),
            )
            self._dirty = False
        return self._roster

    async def refresh(self) -> None:
        """Refresh this instance's record and re-rank the jobs if its group changed."""
        if not self.supported or self._left:
            return
        roster = self._roster_now()
        try:
            members = await self.backend.refresh_member(self.instance_id, roster, self.ttl_ms)
        except asyncio.CancelledError:
            raise
        except UnsupportedError as error:
            self.supported = False
            self.log.info(
                "anarchon: %s; every instance claims every job-slot (candidates need"
                ' membership records: docs/scaling.md, "Candidates")',
                error,
            )
            self._apply(())
            return
        except Exception as error:  # keep the last view: extra claims at worst
            if self.policy.is_transient(error):
                self.log.debug("anarchon: refreshing the membership record failed: %s", error)
            else:
                self.policy.report("the membership record", error)
            return
        self._note_members(members)
        group = {m.instance_id for m in members if m.roster == roster}
        group.add(self.instance_id)
        self._apply(tuple(sorted(group)))

    def _note_members(self, members: list[Member]) -> None:
        if self.active:
            now = self.policy.now_ms()
            before = {m.instance_id for m in self.members}
            after = {m.instance_id for m in members}
            for name in sorted(after - before - {self.instance_id}):
                self.events.emit("member_joined", now, member=name)
            for name in sorted(before - after - {self.instance_id}):
                self.events.emit("member_left", now, member=name)
        self.members = members

    def _apply(self, group: tuple[str, ...]) -> None:
        """Adopt ``group`` (empty: every instance claims) and report changed ranks."""
        was_active = self.active
        if group == self.group and was_active == bool(group):
            return
        old = self._ranks if was_active else None
        self.group = group
        self.active = bool(group) and self.k is not None
        names = [job.name for job in self.jobs.values()]
        if self.active:
            assert self.k is not None
            ranks = _core.rendezvous_ranks(list(group), self.instance_id, names, self.k)
            self._ranks = dict(zip(names, ranks, strict=True))
        else:
            self._ranks = {}
        mine = sum(1 for rank in self._ranks.values() if rank is not None)
        if self.active:
            self.log.info(
                "anarchon: %d member(s) with this instance's jobs; %s is a candidate of %d of"
                " %d job(s) (%d per job)",
                len(group),
                self.instance_id,
                mine,
                len(names),
                self.k,
            )
        if self.on_change is None or not (was_active or self.active):
            return
        for job in list(self.jobs.values()):
            before = 0 if old is None else old.get(job.name)
            after = self.rank_of(job)
            if before != after:
                self.on_change(job, before, after)

    async def run(self) -> None:
        """Refresh every ``refresh_ms`` (a loop task)."""
        while self.supported and not self._left:
            await asyncio.sleep(self.refresh_ms / 1000)
            await self.refresh()

    async def leave(self, timeout_s: float) -> None:
        """Remove this instance's record (``stop()``, before it hands over its runs)."""
        if not self.supported or self._left:
            return
        self._left = True
        try:
            await asyncio.wait_for(self.backend.leave_member(self.instance_id), timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # it expires on its own
            self.log.debug("anarchon: removing the membership record failed: %s", error)
