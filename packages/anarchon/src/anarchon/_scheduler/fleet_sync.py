"""The scheduler's side of the fleet registry and controls (docs/fleet.md).

:class:`FleetSync` declares this instance's jobs (one ``declare`` call for
all of them) when they are prepared and every ``refresh_ms``, then reads the
registry once to find schedule drift; it also keeps the fleet-wide controls,
read with one ``controls`` call at most once per wake-up and cached for
``control_cache_s``; each read is handed to ``on_controls`` (the catch-up
after ``resume``, :mod:`anarchon._scheduler.resume_catch_up`). A backend whose members raise
:class:`~anarchon.errors.UnsupportedError` has no registry: that is logged
once at DEBUG and scheduling goes on without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable

from anarchon._scheduler.store_retry import StorePolicy
from anarchon.backend.base import Backend
from anarchon.clock import Clock
from anarchon.errors import AnarchonError, UnsupportedError
from anarchon.events import EventBus, job_zone
from anarchon.fleet.controls import skip_reason
from anarchon.fleet.fingerprints import describe_schedule, fingerprint
from anarchon.fleet.types import Declaration, JobControl
from anarchon.jobs import Job

__all__ = ["DEFAULT_CONTROL_CACHE_S", "DEFAULT_REFRESH_MS", "FleetSync", "report_drift"]

DEFAULT_REFRESH_MS = 120_000
"""How often an instance refreshes its declarations (entries live three times as long)."""
DEFAULT_CONTROL_CACHE_S = 1.0
"""How long the fleet-wide controls read in one wake-up are reused."""

Drift = Callable[[str, dict[str, int]], None]
"""``on_drift(job, {fingerprint: instances})``: instances declare different schedules for ``job``."""


class FleetSync:
    """Declares this instance's jobs, detects drift and caches the controls."""

    def __init__(
        self,
        *,
        backend: Backend,
        instance_id: str,
        jobs: dict[str, Job],
        policy: StorePolicy,
        clock: Clock,
        log: logging.Logger,
        refresh_ms: int,
        control_cache_s: float,
        on_drift: Drift,
    ) -> None:
        self.backend = backend
        self.instance_id = instance_id
        self.jobs = jobs
        self.policy = policy
        self.clock = clock
        self.log = log
        self.refresh_ms = refresh_ms
        self.ttl_ms = 3 * refresh_ms
        self.control_cache_s = control_cache_s
        self.on_drift = on_drift
        self.registry = True
        self.controls_supported = True
        self._controls: dict[str, JobControl] = {}
        self.on_controls: Callable[[dict[str, JobControl]], Awaitable[None]] | None = None
        """Called with every successful read of the controls (the resume catch-up)."""
        self._controls_read_at: float | None = None
        self._drift_seen: set[tuple[str, frozenset[str]]] = set()
        self._prints: dict[str, tuple[Job, str]] = {}

    # Registry -----------------------------------------------------------

    def fingerprint_of(self, job: Job) -> str:
        """The fingerprint of ``job``'s schedule (cached while the job object is the same)."""
        cached = self._prints.get(job.name)
        if cached is None or cached[0] is not job:
            cached = (job, fingerprint(job))
            self._prints[job.name] = cached
        return cached[1]

    async def declare(self, jobs: Iterable[Job] | None = None) -> None:
        """Declare ``jobs`` (default: all of this instance's) in one call, then check drift."""
        if not self.registry:
            return
        chosen = list(self.jobs.values()) if jobs is None else list(jobs)
        entries: list[Declaration] = []
        for job in chosen:
            try:
                text = describe_schedule(job.schedule)
            except AnarchonError:  # a schedule type the registry cannot describe
                continue
            entries.append(
                Declaration(
                    job.name,
                    self.instance_id,
                    self.fingerprint_of(job),
                    text,
                    seen_at=0,
                    expires_at=0,
                )
            )
        try:
            if entries:
                await self.backend.declare(entries, self.ttl_ms)
            declared = await self.backend.declarations()
        except asyncio.CancelledError:
            raise
        except UnsupportedError as error:
            self.registry = False
            self.log.debug("anarchon: no fleet registry: %s", error)
            return
        except Exception as error:
            if self.policy.is_transient(error):
                self.log.debug("anarchon: fleet registry refresh failed: %s", error)
            else:
                self.policy.report("the fleet registry", error)
            return
        self._check_drift(declared)

    def _check_drift(self, declared: list[Declaration]) -> None:
        by_job: dict[str, Counter[str]] = {}
        for entry in declared:
            if entry.job in self.jobs:
                by_job.setdefault(entry.job, Counter())[entry.fingerprint] += 1
        for name, counts in by_job.items():
            if len(counts) < 2:
                continue
            key = (name, frozenset(counts))
            if key in self._drift_seen:
                continue
            self._drift_seen.add(key)
            self.on_drift(name, dict(sorted(counts.items())))

    async def run(self) -> None:
        """Refresh the declarations every ``refresh_ms`` (a loop task)."""
        while self.registry:
            await asyncio.sleep(self.refresh_ms / 1000)
            await self.declare()

    # Controls -----------------------------------------------------------

    async def refresh_controls(self) -> None:
        """Read the controls (one call for all jobs) unless the cached ones are fresh."""
        if not self.controls_supported:
            return
        now = self.clock.monotonic()
        read_at = self._controls_read_at
        if read_at is not None and now - read_at < self.control_cache_s:
            return
        self._controls_read_at = now
        try:
            # No timeout of our own: a read cut short would keep stale controls and
            # run a paused slot. The driver's timeouts bound it like any store call.
            controls = await self.backend.controls()
        except asyncio.CancelledError:
            raise
        except UnsupportedError as error:
            self.controls_supported = False
            self.log.debug("anarchon: no fleet-wide controls: %s", error)
        except Exception as error:  # keep the last controls read
            if self.policy.is_transient(error):
                self.log.debug("anarchon: reading fleet-wide controls failed: %s", error)
            else:
                self.policy.report("the fleet-wide controls", error)
        else:
            self._controls = controls
            if self.on_controls is not None:
                await self.on_controls(controls)

    def skip_reason(self, job: str, slot: int) -> str | None:
        """Why the controls skip ``(job, slot)``, or None to run it."""
        return skip_reason(self._controls.get(job), slot)


def report_drift(
    log: logging.Logger,
    events: EventBus,
    instance_id: str,
    known: Job | None,
    job: str,
    fingerprints: dict[str, int],
    fleet: FleetSync | None,
    now_ms: int,
) -> None:
    """Instances declare different schedules for ``job``: warn, and emit ``schedule_drift``.

    ``fingerprints`` maps each fingerprint to the number of instances that
    hold it; ``known`` is this instance's job of that name, if any.
    """
    mine = fleet.fingerprint_of(known) if fleet is not None and known is not None else None
    log.warning(
        "anarchon: schedule drift for job %s: instances declare different schedules"
        " (fingerprint: instances %s; this instance: %s)",
        job,
        ", ".join(f"{fp}: {n}" for fp, n in fingerprints.items()),
        mine,
        extra={"job": job, "fingerprints": fingerprints, "instance": instance_id},
    )
    events.emit(
        "schedule_drift",
        now_ms,
        job,
        zone=job_zone(known) if known is not None else "UTC",
        details={"fingerprints": dict(fingerprints), "this_instance": mine},
    )
