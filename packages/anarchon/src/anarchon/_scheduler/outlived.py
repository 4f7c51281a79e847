"""Runs whose sync handler outlives ``stop()``: renewed, then finished, from the lease thread.

``stop()`` waits ``stop_grace``, cancels, and waits ``stop_grace`` more. A
sync handler's thread cannot be stopped: if it still lives then, ``stop()``
returns and the run goes to the lease thread as an :class:`OutlivedRun`. The
lease thread keeps renewing its lease (a backup never starts beside it) until
the thread returns, then stores its end with the lease thread's own backend:
finished with its result when it returned (it did its work), handed over
(released) when it raised. Only the process's death ends the renewals
(docs/leases.md, "Stopping").
"""

from __future__ import annotations

import asyncio
import logging
import time

from anarchon._scheduler.run_state import HandlerThread
from anarchon._scheduler.store_retry import describe_error
from anarchon.backend.base import Backend
from anarchon.events import job_zone, log_extra, slot_iso
from anarchon.jobs import Job
from anarchon.types import ResultWrite, RunFinish, RunKey, StoredResult

__all__ = ["OutlivedRun", "end_outlived"]

_GIVE_UP_S = 60.0
"""How long an outlived run's end is retried through a store outage once its thread returned."""


class OutlivedRun:
    """A run ``stop()`` left to the lease thread: what is needed to renew and end it."""

    __slots__ = (
        "attempt",
        "done",
        "ended_at",
        "instance_id",
        "job",
        "lease_until",
        "slot",
        "thread",
        "token",
    )

    def __init__(
        self,
        *,
        job: Job,
        slot: int,
        token: str,
        attempt: int,
        instance_id: str,
        thread: HandlerThread,
        lease_until: float,
    ) -> None:
        self.job = job
        self.slot = slot
        self.token = token
        self.attempt = attempt
        self.instance_id = instance_id
        self.thread = thread
        self.lease_until = lease_until
        """Monotonic end of the lease as last confirmed."""
        self.ended_at: float | None = None
        """Monotonic time the thread was first seen ended (the end's retries count from it)."""
        self.done = False
        """True once its end is stored, refused, or given up on: nothing more to do."""

    @property
    def key(self) -> RunKey:
        """The run's key in the store."""
        return RunKey(self.job.name, self.slot, self.token)

    def describe(self) -> str:
        """``job slot <iso> attempt n`` for logs."""
        zone = job_zone(self.job)
        return f"{self.job.name} slot {slot_iso(self.slot, zone)} attempt {self.attempt}"

    def extra(self) -> dict[str, object]:
        """The structured log fields of the run."""
        return log_extra(
            self.job.name, self.slot, self.attempt, self.instance_id, job_zone(self.job)
        )


async def end_outlived(
    backend: Backend, run: OutlivedRun, call_timeout_s: float, log: logging.Logger
) -> None:
    """Store the end of ``run`` whose thread returned; sets ``run.done`` unless it must be retried."""
    store = backend.runs
    assert store is not None
    now = time.monotonic()
    if run.ended_at is None:
        run.ended_at = now
    thread = run.thread
    try:
        if thread.error is not None:
            released = await asyncio.wait_for(store.release_many([run.key]), call_timeout_s)
            log.warning(
                "anarchon: %s outlived stop() and raised %s; handed over (released=%s)",
                run.describe(),
                describe_error(thread.error),
                bool(released and released[0]),
                extra=run.extra(),
            )
            run.done = True
            return
        finish = RunFinish(run.job.name, run.slot, run.token, "ok")
        answers = await asyncio.wait_for(store.finish_many([finish]), call_timeout_s)
        if not (answers and answers[0] is True):
            log.warning(
                "anarchon: %s outlived stop() and returned, but its lease was lost meanwhile;"
                " its result is not stored",
                run.describe(),
                extra=run.extra(),
            )
            run.done = True
            return
        result = StoredResult(
            run.slot,
            run.token,
            run.instance_id,
            "ok",
            thread.started_at,
            thread.finished_ms(),
            None,
            run.attempt,
        )
        write = ResultWrite(run.job.name, result, run.job.history_size, run.job.history_ttl_ms)
        await asyncio.wait_for(backend.save_results([write]), call_timeout_s)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        transient = isinstance(error, asyncio.TimeoutError) or backend.is_transient(error)
        if transient and now - run.ended_at < _GIVE_UP_S:
            log.debug("anarchon: %s: storing its end failed (%s); retrying", run.describe(), error)
            return
        log.error(
            "anarchon: %s outlived stop(); storing its end failed: %s",
            run.describe(),
            describe_error(error),
            extra=run.extra(),
        )
        run.done = True
        return
    log.info(
        "anarchon: %s outlived stop(); finished with its result after its handler returned",
        run.describe(),
        extra=run.extra(),
    )
    run.done = True
