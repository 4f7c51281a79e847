"""anarchon: distributed cron for Python. Every instance declares the jobs; exactly one runs each slot."""

from __future__ import annotations

from anarchon import _core
from anarchon.backend import STORE_FORMAT, Backend, RunStore
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
    UnsupportedError,
)
from anarchon.events import Event
from anarchon.history import build_history
from anarchon.memory import MemoryBackend
from anarchon.scheduler import Scheduler, SchedulerThread
from anarchon.schedules import Cron, Every
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
    "MemoryBackend",
    "ResultWrite",
    "RunClaim",
    "RunContext",
    "RunFinish",
    "RunKey",
    "RunRecord",
    "RunStore",
    "Scheduler",
    "SchedulerThread",
    "SkewedClock",
    "StoreFormatError",
    "StoredResult",
    "SyncScheduler",
    "SystemClock",
    "UnknownBackendError",
    "UnsupportedError",
    "__version__",
    "build_history",
]
