"""The state of one run on this instance: an explicit object instead of task names and flags.

A :class:`Run` is made when a slot falls due and lives until its end is
stored (or it is dropped). Its :class:`Phase` says where it is; ``ending``
says why it stops early, if it does.

::

    CLAIMING ──won──▶ RUNNING ──handler ended──▶ FINISHING ──stored──▶ ENDED
        │  ▲
  running│  │re-check (create=False)
        ▼  │
        BACKUP
"""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from typing import Any

from anarchon.context import RunContext
from anarchon.jobs import Job

__all__ = ["CLAIM_NOT_DURABLE", "Ending", "HandlerThread", "Phase", "Run"]

CLAIM_NOT_DURABLE = "claim_not_durable"
"""The reason of a slot skipped (or run, ``if_uncertain="run"``) on a claim not confirmed durable."""


class Phase(enum.Enum):
    """Where a run is."""

    CLAIMING = "claiming"
    """Its claim is queued or in flight."""
    BACKUP = "backup"
    """Another instance holds the lease; this one re-checks it."""
    RUNNING = "running"
    """The handler runs here (the lease is renewed)."""
    FINISHING = "finishing"
    """The handler ended; its end is on the way to the store (the lease is still renewed)."""
    ENDED = "ended"
    """Nothing left to do here."""


class Ending(enum.Enum):
    """Why a run ends other than by its handler returning."""

    LEASE_LOST = "lease_lost"
    """Another instance owns the run now: no result is stored."""
    HAND_OVER = "hand_over"
    """Stopping: the lease is released so a backup takes over."""
    STORE_ERROR = "store_error"
    """The store refused the lease's renewal with a permanent error."""


class HandlerThread:
    """A sync handler's thread, seen from any thread: whether it returned, and how.

    The scheduler's loop waits for the thread through an asyncio future; the
    lease thread, which keeps renewing the lease of a run that outlives
    ``stop()``, reads this instead (docs/leases.md, "Stopping").
    """

    __slots__ = ("elapsed_s", "ended", "error", "started_at")

    def __init__(self, started_at: int) -> None:
        self.started_at = started_at
        """Store time (ms) at which the handler started."""
        self.ended = threading.Event()
        """Set when the handler returned or raised."""
        self.error: BaseException | None = None
        """What the handler raised, if it raised."""
        self.elapsed_s = 0.0
        """How long the handler ran (set when it ended)."""

    def call(self, handler: Any, *args: Any) -> Any:
        """Call ``handler(*args)`` in the thread, recording its end."""
        started = time.monotonic()
        try:
            return handler(*args)
        except BaseException as error:
            self.error = error
            raise
        finally:
            self.elapsed_s = time.monotonic() - started
            self.ended.set()

    def finished_ms(self) -> int:
        """Store time (ms) at which the handler ended (its start plus its duration)."""
        return self.started_at + int(self.elapsed_s * 1000)


class Run:
    """One run of ``(job, slot)`` on this instance."""

    __slots__ = (
        "__weakref__",  # the handler's ctx.owner_check refers to its run weakly (executor.py)
        "abandoned",
        "attempt",
        "catch_up_of",
        "claim_latency_ms",
        "ctx",
        "deadline_ms",
        "ending",
        "exception",
        "fire_at",
        "handler_thread",
        "job",
        "key",
        "lease_until",
        "leased",
        "phase",
        "recheck",
        "short",
        "skip_reason",
        "slot",
        "store_error",
        "task",
        "timeout_timer",
        "token",
        "uncertain",
        "wait_overlap",
        "waiting",
    )

    def __init__(self, job: Job, slot: int, token: str, deadline_ms: int, *, leased: bool) -> None:
        self.job = job
        self.slot = slot
        self.key = (job.name, slot)
        """``(job, slot)``: the run's key in the executor's ``active``."""
        self.token = token
        self.deadline_ms = deadline_ms
        """Store time after which a claim that would create the run is late."""
        self.leased = leased
        """True on lease backends (the run holds a lease while it runs)."""
        self.phase = Phase.CLAIMING
        self.ending: Ending | None = None
        self.recheck = False
        self.wait_overlap = True
        """False for the last claim of a slot answered ``overlap`` (it records the skip)."""
        self.skip_reason: str | None = None
        """Set when this won slot is skipped (``paused``, ``skip_next``, ``claim_not_durable``)."""
        self.uncertain = False
        """True when the store won the current attempt's claim but could not confirm it durable."""
        """True once this run has been a backup: its claims no longer create the run."""
        self.attempt = 0
        self.catch_up_of: int | None = None
        """The paused slot this run stands for when it is the catch-up of a ``resume``."""
        self.claim_latency_ms: float | None = None
        """The round trip of the claim that won this run (ms), for ``run_started``."""
        self.lease_until = 0.0
        """Monotonic time at which the last confirmed lease ends (the runner's view)."""
        self.short = False
        """True while the run holds the short lease of a slot claimed ahead: until its handler
        has started and a renewal has extended it to the full lease (docs/leases.md)."""
        self.store_error: str | None = None
        """The permanent store error that ended the run (``Ending.STORE_ERROR``)."""
        self.ctx: RunContext | None = None
        self.exception: BaseException | None = None
        """The error the handler raised in the current attempt (for ``retry``)."""
        self.task: asyncio.Task[Any] | None = None
        self.timeout_timer: asyncio.TimerHandle | None = None
        self.fire_at = 0
        """Store time before which the handler does not start (a slot claimed ahead), else 0."""
        self.waiting = False
        """True while a won run waits for its ``fire_at`` (its handler has not started)."""
        self.abandoned = False
        """Set by ``stop()`` when it stops waiting for a handler that still lives."""
        self.handler_thread: HandlerThread | None = None
        """A sync handler's thread while it runs (None for async handlers)."""

    @property
    def holds_lease(self) -> bool:
        """True while this instance's lease must be renewed (running or finishing, not lost)."""
        return (
            self.leased
            and self.phase in (Phase.RUNNING, Phase.FINISHING)
            and self.ending is not Ending.LEASE_LOST
        )

    def needs_renewal(self, now: float, interval_s: float) -> bool:
        """True if this heartbeat tick must renew the lease (monotonic ``now``).

        A lease still good for more than two intervals is skipped: it will be
        renewed at the next tick, whose call ends within one interval (the
        call timeout). With the default lease (three intervals, less a
        one-interval safety margin, so two on the runner's clock) that skips
        only leases long against their heartbeat. A run claimed ahead whose
        handler has not started is never renewed by a tick: its short lease
        lasts past its fire time by construction, and is extended when the
        handler starts (the start renewal); renewing it earlier would let a
        dead instance hold the slot for a whole lease.
        """
        left = self.lease_until - now
        if self.waiting:  # a full lease on a waiting run (a store clock that stepped): as before
            return not self.short and left <= 1.75 * interval_s
        return self.short or left <= 2 * interval_s

    def __repr__(self) -> str:
        return f"Run({self.job.name!r}, {self.slot}, {self.phase.value}, attempt={self.attempt})"
