"""The scheduler's side of the fleet registry and controls (docs/fleet.md).

:class:`FleetSync` declares this instance's jobs (one ``declare`` call for
all of them) when they are prepared and every ``refresh_ms``, then reads the
registry once to find schedule drift; it also keeps the fleet-wide controls,
read with one ``controls`` call at most once per wake-up and cached for
``control_cache_s``; each read is handed to ``on_controls`` (the catch-up
after ``resume``, :mod:`anarchon._scheduler.resume_catch_up`). A backend whose members raise
:class:`~anarchon.errors.UnsupportedError` has no registry: that is logged
once at DEBUG and scheduling goes on without it.

Until the controls were read once, nothing is claimed: a wake-up with due
slots retries the read with backoff for up to :data:`CONTROLS_WAIT_S`, so a
restarted instance never runs a paused job because its first read failed.
After that it claims without them and logs an ERROR (docs/fleet.md,
"Pause, resume and skip"). Drift is logged as one summary line when the
set of drifting jobs changes, and one line when it ends; each job's
``schedule_drift`` event is emitted once per drift, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable

from anarchon._scheduler.store_retry import StorePolicy
from anarchon._scheduler.tasks import cancel_until_done
from anarchon.backend.base import Backend
from anarchon.clock import Clock
from anarchon.errors import AnarchonError, UnsupportedError
from anarchon.events import EventBus, job_zone
from anarchon.fleet.controls import SKIP_LEAD_MS, skip_reason
from anarchon.fleet.fingerprints import describe_schedule, fingerprint
from anarchon.fleet.types import Declaration, JobControl
from anarchon.jobs import Job

__all__ = [
    "CONTROLS_REFRESH_WAIT_S",
    "CONTROLS_WAIT_S",
    "DEFAULT_CONTROL_CACHE_S",
    "DEFAULT_REFRESH_MS",
    "FleetSync",
    "report_drift",
]

DEFAULT_REFRESH_MS = 120_000
"""How often an instance refreshes its declarations (entries live three times as long)."""
DEFAULT_CONTROL_CACHE_S = 1.0
"""How long the fleet-wide controls read in one wake-up are reused."""
CONTROLS_WAIT_S = 30.0
"""How long an instance that has never read the controls holds its claims, retrying the read."""
CONTROLS_REFRESH_WAIT_S = 0.25
"""How long claims wait for a refresh of controls read before; then they go on with those."""
_CONTROLS_RETRY_MAX_S = 2.0
_DRIFT_NAMES_SHOWN = 5

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
        self.last_controls_error: BaseException | None = None
        self.on_controls: Callable[[dict[str, JobControl]], Awaitable[None]] | None = None
        """Called with every successful read of the controls (the resume catch-up)."""
        self._controls_read_at: float | None = None
        self.controls_known = False
        """True once the controls were read (claims wait for that, up to ``controls_wait_s``)."""
        self.controls_wait_s = CONTROLS_WAIT_S
        self._refresh: asyncio.Task[bool] | None = None
        """A read of controls known before, still waiting for the store's answer."""
        self._claiming_blind = False
        """The wait ran out: claims go on without the controls until a read succeeds."""
        self._drift_seen: set[tuple[str, frozenset[str]]] = set()
        self._drifting: frozenset[str] = frozenset()
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
        drifting = {name: counts for name, counts in by_job.items() if len(counts) > 1}
        for name, counts in drifting.items():
            key = (name, frozenset(counts))
            if key in self._drift_seen:
                continue
            self._drift_seen.add(key)
            self.on_drift(name, dict(sorted(counts.items())))
        self._log_drift(drifting)

    def _log_drift(self, drifting: dict[str, Counter[str]]) -> None:
        """One line when the set of drifting jobs changes, one when drift ends."""
        names = frozenset(drifting)
        if names == self._drifting:
            return
        self._drifting = names
        if not names:
            self.log.info(
                "anarchon: schedule drift ended: every instance declares the same schedules"
                " for this instance's jobs",
                extra={"instance": self.instance_id, "drifting_jobs": 0},
            )
            return
        shown = sorted(names)[:_DRIFT_NAMES_SHOWN]
        more = len(names) - len(shown)
        details = "; ".join(
            f"{name} ({', '.join(f'{fp}: {n}' for fp, n in sorted(drifting[name].items()))};"
            f" this instance: {self.fingerprint_of(self.jobs[name])})"
            for name in shown
        )
        self.log.warning(
            "anarchon: schedule drift on %d job(s): instances declare different schedules"
            " (fingerprint: instances): %s%s",
            len(names),
            details,
            f"; and {more} more" if more else "",
            extra={"instance": self.instance_id, "drifting_jobs": len(names)},
        )

    async def run(self) -> None:
        """Refresh the declarations every ``refresh_ms`` (a loop task)."""
        while self.registry:
            await asyncio.sleep(self.refresh_ms / 1000)
            await self.declare()

    # Controls -----------------------------------------------------------

    async def refresh_controls(self, *, wait: bool = True) -> None:
        """Read the controls (one call for all jobs) unless the cached ones are fresh.

        Until they were read once, ``wait`` retries the read with backoff for
        up to ``controls_wait_s`` (claims wait meanwhile); then claims go on
        without them, with an ERROR logged.
        """
        if not self.controls_supported:
            return
        if wait and not self.controls_known and not self._claiming_blind:
            await self._wait_for_controls()
            return
        now = self.clock.monotonic()
        read_at = self._controls_read_at
        if read_at is not None and now - read_at < self.control_cache_s:
            return
        if not self.controls_known:
            self._controls_read_at = now
            await self._read_controls()
            return
        # Controls read before: claims wait a moment for the refresh, then go on
        # with the last ones read while it finishes on its own. A store whose
        # controls answer later than its claims (a JetStream KV stream still
        # electing its leader) must not hold every claim for a request timeout.
        refresh = self._refresh
        if refresh is None or refresh.done():
            self._controls_read_at = now
            refresh = asyncio.ensure_future(self._read_controls())
            self._refresh = refresh
        await asyncio.wait((refresh,), timeout=CONTROLS_REFRESH_WAIT_S)

    async def close(self) -> None:
        """Wait out a refresh of the controls still in flight (at stop)."""
        refresh, self._refresh = self._refresh, None
        if refresh is not None:
            await cancel_until_done([refresh])

    async def _read_controls(self) -> bool:
        """One read of the controls: True if it succeeded (or the backend has none)."""
        try:
            # No timeout of our own: a read cut short would keep stale controls and
            # run a paused slot. The driver's timeouts bound it like any store call.
            controls = await self.backend.controls()
        except asyncio.CancelledError:
            raise
        except UnsupportedError as error:
            self.controls_supported = False
            self.log.debug("anarchon: no fleet-wide controls: %s", error)
            return True
        except Exception as error:  # keep the last controls read
            if self.policy.is_transient(error):
                self.log.debug("anarchon: reading fleet-wide controls failed: %s", error)
            else:
                self.policy.report("the fleet-wide controls", error)
            self.last_controls_error = error
            return False
        if self._claiming_blind:
            self._claiming_blind = False
            self.log.warning(
                "anarchon: fleet-wide controls read again: pauses and skips apply again"
            )
        self.controls_known = True
        self._controls = controls
        if self.on_controls is not None:
            await self.on_controls(controls)
        return True

    async def _wait_for_controls(self) -> None:
        """Hold claims until the controls are read, retrying for up to ``controls_wait_s``."""
        started = time.monotonic()  # real time: a fake clock does not move while we sleep
        delay = 0.05
        warned = False
        while not await self._read_controls():
            waited = time.monotonic() - started
            if waited >= self.controls_wait_s:
                self._claiming_blind = True
                self.log.error(
                    "anarchon: could not read the fleet-wide controls for %.0f s (%s);"
                    " claiming without them: a paused job may run until they are read",
                    waited,
                    self.last_controls_error,
                )
                return
            if not warned:
                warned = True
                self.log.warning(
                    "anarchon: cannot read the fleet-wide controls (%s); holding claims"
                    " until they are read (at most %.0f s)",
                    self.last_controls_error,
                    self.controls_wait_s,
                )
            await asyncio.sleep(min(delay, self.controls_wait_s - waited))
            delay = min(delay * 2, _CONTROLS_RETRY_MAX_S)
        self._controls_read_at = self.clock.monotonic()
        if warned:
            self.log.warning("anarchon: fleet-wide controls read: claiming")

    def skip_reason(self, job: str, slot: int) -> str | None:
        """Why the controls skip ``(job, slot)``, or None to run it."""
        control = self._controls.get(job)
        if control is None:
            return None
        known = self.jobs.get(job)
        lead = SKIP_LEAD_MS if self.backend.runs is not None else 0
        return skip_reason(control, slot, known.schedule if known is not None else None, lead)


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
    """Instances declare different schedules for ``job``: emit ``schedule_drift``.

    ``fingerprints`` maps each fingerprint to the number of instances that
    hold it; ``known`` is this instance's job of that name, if any. The log
    line is :class:`FleetSync`'s summary of every drifting job (DEBUG here).
    """
    mine = fleet.fingerprint_of(known) if fleet is not None and known is not None else None
    log.debug(
        "anarchon: schedule drift for job %s (fingerprint: instances %s; this instance: %s)",
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
