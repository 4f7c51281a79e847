"""The status page's data from a :class:`~anarchon.Backend` (the one adapter to the store).

Jobs come from the fleet registry through :func:`anarchon.fleet.status.fleet_status`.
The jobs it was given (``jobs=``, or those of a :class:`~anarchon.Scheduler`)
that no instance declares, or all of them on a backend without a registry,
are shown from history and leases alone. Pause and resume write the fleet-wide control of the job.

:meth:`BackendSource.status_page` reads one page of jobs in a number of store
calls bounded by the page size: the registry, the controls, the members and
the clock once, then ``history_many`` and the leases of the page's jobs only.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from anarchon.backend.base import Backend
from anarchon.backend.batching import per_item
from anarchon.backend.registry import resolve_backend
from anarchon.errors import InvalidConfigError, UnsupportedError
from anarchon.fleet.roster import candidates_by_job
from anarchon.fleet.status import (
    JobStatus,
    MemberStatus,
    declaring_instances,
    fleet_members,
    fleet_status,
    job_status,
    live_members,
    member_statuses,
    store_now_ms,
    unknown_jobs_error,
)
from anarchon.fleet.types import Declaration, JobControl
from anarchon.types import ActiveRun, RunRecord
from anarchon.web.source import JobView, StatusPage

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["BackendSource"]


class BackendSource:
    """A :class:`~anarchon.web.StatusSource` reading and writing one backend.

    ``backend`` is a :class:`~anarchon.Backend` or a URL (then the source owns
    it and :meth:`close` closes it). ``jobs`` names the jobs to show when the
    backend has no fleet registry. ``by`` is recorded as who paused or resumed.
    """

    def __init__(
        self,
        backend: Backend | str,
        jobs: Sequence[str] | None = None,
        *,
        by: str = "anarchon.web",
    ) -> None:
        if isinstance(jobs, str):
            raise InvalidConfigError("jobs must be a list of job names, not one string")
        self._owned = isinstance(backend, str)
        self.backend: Backend = resolve_backend(backend)
        self.jobs: list[str] = sorted(set(jobs or ()))
        self.by = by
        self._ready: asyncio.Task[None] | None = None

    @classmethod
    def from_scheduler(cls, scheduler: Scheduler) -> BackendSource:
        """The source of a scheduler's backend, showing at least its jobs."""
        return cls(scheduler.backend, jobs=list(scheduler.jobs))

    async def _init(self) -> None:
        if self._ready is None or (self._ready.done() and self._ready.exception() is not None):
            self._ready = asyncio.ensure_future(self.backend.init())
        await asyncio.shield(self._ready)

    async def now_ms(self) -> int:
        """Store time in ms."""
        await self._init()
        return await store_now_ms(self.backend)

    async def status(self) -> list[JobStatus]:
        """The fleet view of every declared job, and of each given job no instance declares."""
        await self._init()
        try:
            declared = await fleet_status(self.backend)
        except UnsupportedError:
            if not self.jobs:
                raise
            declared = []
        names = {status.job for status in declared}
        extra = [name for name in self.jobs if name not in names]
        if not extra:
            return declared
        controls = await self._controls()
        found = await asyncio.gather(*(self._from_history(name, controls) for name in extra))
        return sorted([*declared, *found], key=lambda status: status.job)

    async def known(self) -> list[str]:
        """The names of the jobs the page shows."""
        await self._init()
        try:
            declared = {d.job for d in await self.backend.declarations()}
        except UnsupportedError:
            declared = set()
        return sorted(declared | set(self.jobs))

    async def _check(self, job: str) -> None:
        known = await self.known()
        if job not in known:
            raise unknown_jobs_error([job], known)

    async def members(self) -> list[MemberStatus] | None:
        """The live members, or None when the backend keeps no membership records."""
        await self._init()
        try:
            return await fleet_members(self.backend)
        except UnsupportedError:
            return None

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job``, newest first."""
        await self._check(job)
        return await self.backend.history(job, limit)

    async def active(self, job: str) -> list[ActiveRun]:
        """The runs of ``job`` holding a lease (empty without a lease store)."""
        await self._check(job)
        return await self._active(job)

    async def pause(self, job: str) -> JobControl:
        """Pause ``job`` for the whole fleet."""
        return await self._set_paused(job, True)

    async def resume(self, job: str) -> JobControl:
        """Resume ``job`` for the whole fleet (a pending skip stays)."""
        return await self._set_paused(job, False)

    async def close(self) -> None:
        """Close the backend if the source built it from a URL."""
        if self._owned:
            await self.backend.close()

    async def _set_paused(self, job: str, paused: bool) -> JobControl:
        await self._check(job)
        current = (await self.backend.controls()).get(job) or JobControl(job)
        control = dataclasses.replace(
            current, paused=paused, updated_at=await store_now_ms(self.backend), updated_by=self.by
        )
        await self.backend.set_control(control)
        return control

    async def _controls(self) -> dict[str, JobControl]:
        try:
            return await self.backend.controls()
        except UnsupportedError:
            return {}

    async def _declarations(self) -> list[Declaration]:
        try:
            return await self.backend.declarations()
        except UnsupportedError:
            if not self.jobs:
                raise
            return []

    async def _active(self, job: str) -> list[ActiveRun]:
        return [] if self.backend.runs is None else await self.backend.runs.active(job)

    async def status_page(self, offset: int, limit: int, history_limit: int) -> StatusPage:
        """Jobs ``offset`` to ``offset + limit`` (by name) with their recent runs and leases.

        Store calls: the registry, the controls, the members and the clock once
        each, then ``history_many`` of the page's jobs and each one's leases:
        bounded by ``limit``, whatever the size of the fleet. The members and
        every job's candidates are computed from the registry and the members.
        """
        await self._init()
        declarations, controls, members, now = await asyncio.gather(
            self._declarations(),
            self._controls(),
            live_members(self.backend),
            store_now_ms(self.backend),
        )
        candidates = candidates_by_job(members or (), declaring_instances(declarations))
        by_job: dict[str, list[Declaration]] = {name: [] for name in self.jobs}
        for declaration in declarations:
            by_job.setdefault(declaration.job, []).append(declaration)
        names = sorted(by_job)[offset : offset + limit]
        runs = await self.backend.history_many(names, history_limit) if names else {}
        leases = await per_item(self._active, names, limit=16)
        views = []
        for name, held in zip(names, leases, strict=True):
            history = runs.get(name, [])
            status = job_status(
                name,
                by_job[name],
                controls.get(name),
                now,
                history[0] if history else None,
                sum(1 for run in held if run.live),
                candidates=candidates.get(name, ()),
            )
            views.append(JobView(status, history, held))
        shown = None if members is None else member_statuses(members, candidates)
        return StatusPage(total=len(by_job), jobs=views, members=shown)

    async def _from_history(self, name: str, controls: dict[str, JobControl]) -> JobStatus:
        history, leases = await asyncio.gather(self.backend.history(name, 1), self._active(name))
        return job_status(
            name,
            [],
            controls.get(name),
            0,
            history[0] if history else None,
            sum(1 for run in leases if run.live),
        )
