"""anarchon: distributed cron for Python. Every instance declares the jobs; exactly one runs each slot."""

from __future__ import annotations

from anarchon import _core
from anarchon.backend.base import STORE_FORMAT, Backend, RunStore
from anarchon.backend.history import build_history
from anarchon.backend.memory import MemoryBackend
from anarchon.clock import Clock, SkewedClock, SystemClock
from anarchon.context import CancelSignal, RunContext
from anarchon.errors import (
    AnarchonError,
    BackendError,
    BackendUnavailableError,
    DedupeWindowError,
    DuplicateJobError,
    ForeignDataError,
    InvalidConfigError,
    InvalidJobError,
    StoreFormatError,
    UnknownBackendError,
    UnknownJobError,
    UnsupportedError,
)
from anarchon.events import Event
from anarchon.job_options import JobOptions
from anarchon.retry import Retry
from anarchon.scheduler import Scheduler, SchedulerThread
from anarchon.schedules import Cron, Every, Once
from anarchon.sync import SyncScheduler
from anarchon.types import (
    ActiveRun,
    ClaimInput,
    ClaimOutcome,
    ClaimRecord,
    JobLimits,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRecord,
    RunRetry,
    StoredResult,
)

__version__: str = _core.__version__
"""The version, compiled into ``anarchon._core`` from the Cargo workspace version."""

__all__ = [
    "STORE_FORMAT",
    "ActiveRun",
    "AnarchonError",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "CancelSignal",
    "ClaimInput",
    "ClaimOutcome",
    "ClaimRecord",
    "Clock",
    "Cron",
    "DedupeWindowError",
    "DuplicateJobError",
    "Event",
    "Every",
    "ForeignDataError",
    "InvalidConfigError",
    "InvalidJobError",
    "JobLimits",
    "JobOptions",
    "MemoryBackend",
    "Once",
    "ResultWrite",
    "Retry",
    "RunClaim",
    "RunContext",
    "RunFinish",
    "RunKey",
    "RunRecord",
    "RunRetry",
    "RunStore",
    "Scheduler",
    "SchedulerThread",
    "SkewedClock",
    "StoreFormatError",
    "StoredResult",
    "SyncScheduler",
    "SystemClock",
    "UnknownBackendError",
    "UnknownJobError",
    "UnsupportedError",
    "__version__",
    "build_history",
]
